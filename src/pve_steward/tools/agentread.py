"""What the guest agents report for the health check: in-guest filesystems (the filesystem-full check) and
network interfaces (the duplicate-IP check), of the VMs whose agent answered the collector's probe (so the
probe limit, ``agent_probe_limit``, bounds these reads too).

A 403 (PVE 9: VM.GuestAgent.Audit, PVE 8: VM.Monitor) is one skipped check per kind; an agent that stopped
answering meanwhile is not judged; any other failure (an agent that refuses the command, a timeout) is a
skipped check for that VM, said once per kind with the count.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.errors import PveError, PvePermissionError
from pve_steward.pveio.client import ApiPath, ProxmoxClient, api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import vmid as vmid_seg

# command -> (what it tells, where it goes in ClusterData)
KINDS = {
    "get-fsinfo": ("in-guest filesystems", "agent_fsinfo"),
    "network-get-interfaces": ("in-guest network addresses", "agent_interfaces"),
}


async def read_agent_details(client: ProxmoxClient, data: ClusterData) -> list[Missing]:
    """Every kind for every VM whose agent answered, in one bounded gather."""
    vmids = sorted(v for v, ok in data.agent.items() if ok and v in data.guests)
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = [
        (
            f"{command}:{v}",
            api_path("nodes", node_seg(data.guests[v]["node"]), "qemu", vmid_seg(v), "agent", command),
            {},
        )
        for command in KINDS
        for v in vmids
    ]
    got = await gather(client, reads)
    missing: list[Missing] = []
    for command, (what, target) in KINDS.items():
        answers = {int(k.partition(":")[2]): v for k, v in got.items() if k.partition(":")[0] == command}
        missing += _take(answers, getattr(data, target), what, f"/nodes/{{node}}/qemu/{{vmid}}/agent/{command}")
    return missing


def _take(answers: dict[int, Any], into: dict[int, Any], what: str, path: str) -> list[Missing]:
    denied: list[int] = []
    failed: list[tuple[int, PveError]] = []
    for vmid, value in sorted(answers.items()):
        if not isinstance(value, PveError):
            into[vmid] = value.get("result") if isinstance(value, dict) else None
        elif isinstance(value, PvePermissionError):
            denied.append(vmid)
        elif "not running" not in value.message:
            failed.append((vmid, value))
    missing = []
    if denied:
        missing.append(
            Missing.denied(
                f"{what} of {len(denied)} VM(s) (skipped: needs VM.GuestAgent.Audit on PVE 9, VM.Monitor on PVE 8)",
                path,
                "permission denied",
                ("guests",),
            )
        )
    if failed:
        vmid, err = failed[0]
        missing.append(
            Missing(
                what=f"{what} of {len(failed)} VM(s) (first: VM {vmid})",
                path=path,
                error=err.message[:200],
                status=err.status,
                affects=("guests",),
                optional=True,
            )
        )
    return missing
