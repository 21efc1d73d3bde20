"""This token's own privileges for one check: read once, and exact where a verdict stands on one object.

The collector reads ``GET /access/permissions`` (the map of every ACL path) and ``GET /access/acl`` with
its first wave. What the map leaves open, an object a check names but a filtered list did not show
(pve/visibility.py), is asked path by path (``?path=``), a bounded number of them: the rest stays
"cannot tell", which the checks report as not visible, never as absent. Design record 261206-55.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.references import absent_references
from pve_steward.errors import PveError
from pve_steward.pve.visibility import Visibility

PROBE_LIMIT = 64  # objects a check names that the map cannot settle, asked one by one (one read each)


def visibility_from(perms: Any, acl: Any) -> tuple[Visibility, list[Missing]]:
    """The token's view from its privilege map, and the ACL tree when the token reads it whole (Sys.Audit on
    /access: pve-access-control API2/ACL.pm read_acl lists only the entries it may modify otherwise)."""
    if isinstance(perms, PveError) or not isinstance(perms, dict):
        why = perms.message if isinstance(perms, PveError) else "not a privilege map"
        gap = Missing(
            what="this token's own privileges (what PVE's filtered lists hide cannot be told)",
            path="/access/permissions",
            error=why,
            status=perms.status if isinstance(perms, PveError) else None,
        )
        return Visibility.unreadable(why), [gap]
    whole_tree = "Sys.Audit" in (perms.get("/access") or {}) and isinstance(acl, list)
    paths = [str(r.get("path") or "") for r in acl if isinstance(r, dict)] if whole_tree else None
    return Visibility(perms, acl_paths=paths), []


def unsettled(vis: Visibility) -> str:
    """Why this token's view cannot tell whether a filtered list is whole (Visibility.whole is None)."""
    if vis.unread_reason is not None:
        return f"own privileges unread: {vis.unread_reason}"
    return "a NoAccess ACL entry on one object shows only in /access/acl, which needs Sys.Audit on /access"


def probe_paths(data: ClusterData) -> tuple[list[str], list[Missing]]:
    """The object paths to ask about one by one (at most PROBE_LIMIT), and a gap for any left unasked."""
    wanted: list[str] = []
    for f, idents, _areas in absent_references(data):
        wanted += [p for p in data.visibility.undecided(f, sorted(idents, key=str)) if p not in wanted]
    if len(wanted) <= PROBE_LIMIT:
        return wanted, []
    gap = Missing(
        what=f"visibility of {len(wanted) - PROBE_LIMIT} of {len(wanted)} objects checks name but PVE's lists do "
        "not show (they stay 'not visible to this token')",
        path="/access/permissions",
        error="not asked: too many",
        optional=True,
    )
    return wanted[:PROBE_LIMIT], [gap]


def hidden_references(data: ClusterData) -> list[Missing]:
    """After the asking: each object a check names that PVE's list left out and this token does not provably
    see, said once with which privilege would show it (CHECK_SKIPPED; the checks then call it neither missing
    nor absent). One the token would see is simply absent, and the checks say so."""
    out: list[Missing] = []
    for f, idents, areas in absent_references(data):
        for ident in sorted(idents):
            if data.hidden(f, ident) is not None:
                out.append(Missing.not_visible(f, f.at(ident), areas, ident))
    return out


def learn(data: ClusterData, path: str, answer: Any) -> None:
    """One ``?path=`` answer: {path: {privilege: 1}} ({path: {}} without any)."""
    if isinstance(answer, dict):
        data.visibility.learn(path, answer.get(path) or {})
