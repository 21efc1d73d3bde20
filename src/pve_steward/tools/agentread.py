"""In-guest filesystems for the filesystem-full check: ``agent/get-fsinfo`` of the VMs whose agent answered
the collector's probe (so the probe limit, ``agent_probe_limit``, bounds these reads too).

A 403 (PVE 9: VM.GuestAgent.Audit, PVE 8: VM.Monitor) is one skipped check; an agent that stopped answering
meanwhile is not judged; any other failure (an agent that refuses guest-get-fsinfo, a timeout) is a
skipped check for that VM, said once with the count.
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.errors import PveError, PvePermissionError
from pve_steward.pveio.client import ApiPath, ProxmoxClient, api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import vmid as vmid_seg

PATH = "/nodes/{node}/qemu/{vmid}/agent/get-fsinfo"


async def read_agent_filesystems(client: ProxmoxClient, data: ClusterData) -> list[Missing]:
    vmids = sorted(v for v, ok in data.agent.items() if ok and v in data.guests)
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = [
        (str(v), api_path("nodes", node_seg(data.guests[v]["node"]), "qemu", vmid_seg(v), "agent", "get-fsinfo"), {})
        for v in vmids
    ]
    got = await gather(client, reads)
    denied: list[int] = []
    failed: list[tuple[int, PveError]] = []
    for key, value in sorted(got.items(), key=lambda kv: int(kv[0])):
        vmid = int(key)
        if not isinstance(value, PveError):
            data.agent_fsinfo[vmid] = value.get("result") if isinstance(value, dict) else None
        elif isinstance(value, PvePermissionError):
            denied.append(vmid)
        elif "not running" not in value.message:
            failed.append((vmid, value))
    missing = []
    if denied:
        missing.append(
            Missing.denied(
                f"in-guest filesystems of {len(denied)} VM(s) (skipped: needs VM.GuestAgent.Audit on PVE 9, "
                "VM.Monitor on PVE 8)",
                PATH,
                "permission denied",
                ("guests",),
            )
        )
    if failed:
        vmid, err = failed[0]
        missing.append(
            Missing(
                what=f"in-guest filesystems of {len(failed)} VM(s) (first: VM {vmid})",
                path=PATH,
                error=err.message[:200],
                status=err.status,
                affects=("guests",),
                optional=True,
            )
        )
    return missing
