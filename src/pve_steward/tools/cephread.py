"""Read Ceph through PVE's API, only where the cluster has Ceph.

``/cluster/ceph/status`` decides: PVE answers 500 "binary not installed" or "pveceph configuration not
initialized" where Ceph is not set up (PVE/Ceph/Tools.pm check_ceph_inited), which means "no Ceph",
not a failure. A 403 is a check limited by privileges (CHECK_SKIPPED). The OSD tree, pools and monitors
are cluster-wide answers, read from one online node.
"""

from __future__ import annotations

from pve_steward.analysis.ceph import CephData
from pve_steward.analysis.data import Missing
from pve_steward.analysis.planner.ceph_steps import NodeCeph, active_mgr_alone, node_mds, node_mons, node_osds
from pve_steward.client import ProxmoxClient, api_path, gather
from pve_steward.client import node as node_seg
from pve_steward.errors import PveError, PvePermissionError

NO_CEPH = ("binary not installed", "configuration not initialized", "not fully configured")


def ceph_absent(err: PveError) -> bool:
    return any(text in err.message for text in NO_CEPH)


async def read_ceph(client: ProxmoxClient, online: list[str]) -> tuple[CephData | None, list[Missing]]:
    """The Ceph payloads, or None when the cluster has no Ceph or its status could not be read."""
    status = (await gather(client, [("status", api_path("cluster", "ceph", "status"), {})]))["status"]
    if isinstance(status, PveError):
        if ceph_absent(status):
            return None, []
        return None, [_missing("Ceph status", status, None)]
    data = CephData(status=status)
    if not online:
        return data, [
            Missing("Ceph OSDs, pools and monitors", "/nodes/{node}/ceph", "no node is online", affects=("ceph",))
        ]
    seg = node_seg(online[0])
    got = await gather(
        client,
        [
            ("flags", api_path("cluster", "ceph", "flags"), {}),
            ("metadata", api_path("cluster", "ceph", "metadata"), {}),
            ("osd_tree", api_path("nodes", seg, "ceph", "osd"), {}),
            ("pools", api_path("nodes", seg, "ceph", "pool"), {}),
            ("mons", api_path("nodes", seg, "ceph", "mon"), {}),
        ],
    )
    missing = []
    for key, value in sorted(got.items()):
        if isinstance(value, PveError):
            missing.append(_missing(f"Ceph {key.replace('_', ' ')}", value, online[0]))
        else:
            setattr(data, key, value)
    return data, missing


def _missing(what: str, err: PveError, node: str | None) -> Missing:
    denied = isinstance(err, PvePermissionError)
    return Missing(
        what=what + (" (optional: needs Sys.Audit)" if denied else ""),
        path=err.path or "/cluster/ceph",
        error=err.message,
        node=node,
        status=err.status,
        affects=("ceph",),
        optional=denied,
    )


async def read_node_ceph(client: ProxmoxClient, node: str) -> NodeCeph | None:
    """For an evacuation: the node's OSDs and monitor, the flags, and Ceph's ok-to-stop for each daemon.

    None when the cluster has no Ceph or the node runs no Ceph daemon. A failed read becomes the
    daemon's answer "could not ask" (the plan says so), never "safe".
    """
    status = (await gather(client, [("status", api_path("cluster", "ceph", "status"), {})]))["status"]
    if isinstance(status, PveError) and ceph_absent(status):
        return None
    seg = node_seg(node)
    got = await gather(
        client,
        [
            ("osd_tree", api_path("nodes", seg, "ceph", "osd"), {}),
            ("mons", api_path("nodes", seg, "ceph", "mon"), {}),
            ("mds", api_path("nodes", seg, "ceph", "mds"), {}),
            ("mgrs", api_path("nodes", seg, "ceph", "mgr"), {}),
            ("flags", api_path("cluster", "ceph", "flags"), {}),
        ],
    )
    c = NodeCeph(mgrmap=_mgrmap(status))
    for key, value in got.items():
        if not isinstance(value, PveError):
            setattr(c, key, value)
    if isinstance(got["osd_tree"], PveError) or isinstance(got["mons"], PveError):
        err = got["osd_tree"] if isinstance(got["osd_tree"], PveError) else got["mons"]
        assert isinstance(err, PveError)
        c.safety["osd.?"] = f"could not list the node's Ceph daemons: {err.message}"
    if isinstance(got["mds"], PveError):
        c.safety["mds.?"] = f"could not list the Ceph metadata servers: {got['mds'].message}"
    safety = api_path("nodes", seg, "ceph", "cmd-safety")
    asks = [(f"osd.{i}", safety, {"service": "osd", "id": str(i), "action": "stop"}) for i in node_osds(c, node)]
    asks += [(f"mon.{m}", safety, {"service": "mon", "id": m, "action": "stop"}) for m in node_mons(c, node)]
    asks += [(f"mds.{d}", safety, {"service": "mds", "id": d, "action": "stop"}) for d in node_mds(c, node)]
    for daemon, answer in (await gather(client, asks)).items():
        c.safety[daemon] = answer.message if isinstance(answer, PveError) else answer
    if not asks and not c.safety and active_mgr_alone(c, node) is None:
        return None
    return c


def _mgrmap(status: object) -> dict[str, object]:
    """``mgr dump`` as PVE re-adds it to the status (PVE/Ceph/Tools.pm ceph_cluster_status)."""
    mgrmap = status.get("mgrmap") if isinstance(status, dict) else None
    return mgrmap if isinstance(mgrmap, dict) else {}
