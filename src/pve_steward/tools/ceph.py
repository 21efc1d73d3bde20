"""Ceph OSD flags: set or unset one (noout around a node's maintenance), through the two-phase runner.

``PUT /cluster/ceph/flags/{flag}`` (pve-manager PVE/API2/Cluster/Ceph.pm update_flag) runs
``ceph osd set|unset <flag>`` before answering, so the write is synchronous and read back with
``GET /cluster/ceph/flags/{flag}``. Preconditions: Ceph is present, the token holds Sys.Modify on /,
and the flag is not already in the wanted state.
"""

from __future__ import annotations

from typing import Any, Literal

from pve_steward.errors import PveError
from pve_steward.pveio.client import api_path, ceph_flag
from pve_steward.security.guard import Refused, guarded
from pve_steward.security.tiers import Tier
from pve_steward.tools.cephread import API_NODE_HINT, ceph_absent
from pve_steward.tools.context import ToolContext
from pve_steward.tools.twophase import (
    Plan,
    TargetRef,
    WriteResult,
    fingerprint,
    privilege_check,
    sentence,
    toggle_check,
    two_phase,
)
from pve_steward.tools.writes import Token

CephFlag = Literal[
    "noout",
    "norebalance",
    "nobackfill",
    "norecover",
    "noscrub",
    "nodeep-scrub",
    "noin",
    "noup",
    "nodown",
    "pause",
    "notieragent",
]
WAIT_SYNC = 60
RISKS_WHEN_SET = {
    "noout": "while set, a failed OSD is never marked out: its data stays with fewer copies until it returns",
    "norebalance": "while set, data is not rebalanced after a CRUSH change",
    "norecover": "while set, degraded data is not recovered",
    "nobackfill": "while set, backfill does not run",
    "noscrub": "while set, scrubbing does not detect corruption",
    "nodeep-scrub": "while set, deep scrubbing does not detect corruption",
    "noin": "while set, returning OSDs stay out",
    "noup": "while set, starting OSDs are not marked up",
    "nodown": "while set, failed OSDs are not marked down and client I/O to them hangs",
    "pause": "stops all client reads and writes on the whole Ceph cluster: every guest on Ceph hangs",
    "notieragent": "while set, cache tiering stops",
}


async def _flag_plan(t: ToolContext, flag: str, wanted: bool) -> Plan:
    path = api_path("cluster", "ceph", "flags", ceph_flag(flag))
    try:
        current = bool(int(await t.client.get(path) or 0))
    except PveError as exc:
        if ceph_absent(exc):  # /cluster/ceph/flags runs on the node answering the API (no proxyto)
            raise Refused(f"this cluster has no Ceph, or {API_NODE_HINT} (PVE: {exc.message})") from exc
        raise
    verb = "set" if wanted else "unset"
    effect = f"{verb} the Ceph OSD flag {flag} on the whole Ceph cluster (ceph osd {verb} {flag})"
    risks = (
        [RISKS_WHEN_SET.get(flag, "a cluster-wide switch"), f"unset it after the maintenance (ceph_unset_flag {flag})"]
        if wanted
        else [f"Ceph resumes what {flag} held back (marking out, rebalancing or recovery may start data movement)"]
    )
    checks = [await privilege_check(t, "/", ["Sys.Modify"]), toggle_check(current, wanted, on="set", off="unset")]

    async def execute() -> Any:
        return await t.client.call("PUT", path, value=1 if wanted else 0)

    async def verify() -> str | None:
        now = bool(int(await t.client.get(path) or 0))
        return None if now == wanted else f"Ceph still reports {flag} as {'set' if now else 'unset'}"

    return Plan(
        target=TargetRef(id=f"ceph-flag/{flag}"),
        state=fingerprint(flag, current),
        summary=sentence(effect),
        effects=[effect],
        risks=risks,
        checks=checks,
        execute=execute,
        follow="sync",
        verify=verify,
    )


@guarded(toolset="storage", tier=Tier.OPERATOR, destructive=True)
async def ceph_set_flag(t: ToolContext, flag: CephFlag, confirm_token: Token | None = None) -> WriteResult:
    """Set a Ceph OSD flag (e.g. noout before a node's maintenance); refused when it is already set."""
    return await two_phase(t, {"flag": flag}, lambda: _flag_plan(t, flag, True), confirm_token, False, WAIT_SYNC)


@guarded(toolset="storage", tier=Tier.OPERATOR)
async def ceph_unset_flag(t: ToolContext, flag: CephFlag, confirm_token: Token | None = None) -> WriteResult:
    """Unset a Ceph OSD flag (e.g. noout after the maintenance); refused when it is not set."""
    return await two_phase(t, {"flag": flag}, lambda: _flag_plan(t, flag, False), confirm_token, False, WAIT_SYNC)
