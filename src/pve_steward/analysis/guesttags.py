"""Guest tags as PVE stores and guards them: what guest_set_tags's preview promises and checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pve_steward.analysis.pverules import pve_rule
from pve_steward.pve.values import flag


def _style(options: Mapping[str, Any]) -> Mapping[str, Any]:
    style = options.get("tag-style")
    if isinstance(style, str):  # the property-string form, as datacenter.cfg writes it
        return dict(part.split("=", 1) for part in style.split(",") if "=" in part)
    return style if isinstance(style, Mapping) else {}


@pve_rule(
    "guests.tags",
    rule="PVE stores a guest's tags deduplicated, lower-cased and sorted, unless datacenter.cfg tag-style sets "
    "case-sensitive (no lower-casing) or ordering=config (the given order).",
    pve="pve-guest-common src/PVE/GuestHelpers.pm get_unique_tags (qemu-server/pve-container update_vm)",
)
def stored_tags(tags: list[str], options: Mapping[str, Any]) -> list[str]:
    """The tags as PVE will store them, given /cluster/options."""
    style = _style(options)
    sensitive = flag(style.get("case-sensitive"))
    ordered = tags if style.get("ordering") == "config" else sorted(tags, key=None if sensitive else str.lower)
    out: list[str] = []
    for given in ordered:
        tag = given if sensitive else given.lower()
        if tag not in out:
            out.append(tag)
    return out


@pve_rule(
    "guests.tag-permissions",
    rule="Without Sys.Modify on /, every tag a change adds or removes must be one the user may set (any, with "
    "user-tag-access 'free', the default; else its list, or existing tags with 'existing') and never a "
    "registered tag.",
    pve="pve-guest-common src/PVE/GuestHelpers.pm assert_tag_permissions + get_allowed_tags; pve-manager "
    "PVE/API2/Cluster.pm get_options (allowed-tags; the rest needs Sys.Audit on /)",
)
def tag_refusal(
    old: list[str], new: list[str], options: Mapping[str, Any], audit: bool
) -> tuple[str | None, list[str]]:
    """Why PVE refuses the change for a token without Sys.Modify on / (None when it takes it), and the changed tags
    whose fate is not provable: without Sys.Audit on / the options show only 'allowed-tags'."""
    allowed = set(options.get("allowed-tags") or [])
    registered = set(options.get("registered-tags") or [])
    access = options.get("user-tag-access")
    allow = str((access if isinstance(access, Mapping) else {}).get("user-allow") or "free")
    before, after = Counter(old), Counter(new)
    unknown = []
    for tag in sorted(set(before) | set(after)):
        if before[tag] == after[tag] or (tag in allowed and tag not in registered):
            continue
        if not audit:
            unknown.append(tag)
        elif tag in registered or allow != "free":
            return f"changing tag '{tag}' needs Sys.Modify on / (datacenter.cfg registered-tags, user-tag-access)", []
    return None, unknown
