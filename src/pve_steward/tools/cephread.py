"""Read Ceph through PVE's API, only where the cluster has Ceph.

Not every node runs Ceph: PVE answers 500 "binary not installed" (or "pveceph configuration not
initialized") on a node without it (PVE/Ceph/Tools.pm check_ceph_inited). ``/cluster/ceph/*`` has no
proxyto, so it runs on the node the client talks to; ``/nodes/{n}/ceph/*`` runs on node n. Presence is
therefore decided the way PVE's GUI does (www/manager6/dc/Health.js: "try all nodes"): the first online
node whose ``/nodes/{n}/ceph/status`` answers is a Ceph node, and the node-scoped reads go there; only
when every node says "not installed" has the cluster no Ceph. A 403 is a check limited by privileges
(CHECK_SKIPPED).
"""

from __future__ import annotations

from pve_steward.analysis.ceph import CephData
from pve_steward.analysis.data import Missing
from pve_steward.analysis.planner.ceph_steps import NodeCeph, active_mgr_alone, node_mds, node_mons, node_osds
from pve_steward.errors import PveError, PvePermissionError
from pve_steward.pveio.client import ProxmoxClient, api_path, gather
from pve_steward.pveio.client import node as node_seg

NO_CEPH = ("binary not installed", "configuration not initialized", "not fully configured")
API_NODE_HINT = "the node pve-steward talks to does not run Ceph; connect it to a Ceph node"


def ceph_absent(err: PveError) -> bool:
    return any(text in err.message for text in NO_CEPH)


Status = dict[str, object]


async def ceph_node(client: ProxmoxClient, online: list[str]) -> tuple[str | None, Status | None, PveError | None]:
    """The first online node whose ``/nodes/{n}/ceph/status`` answers, with that status.

    (None, None, None): every node said Ceph is not installed there, the cluster has no Ceph.
    (None, None, err): no node answered, and one that did not say "not installed" failed (no quorum,
    timeout, or the token lacks Sys.Audit on /).
    The first node is asked alone (on a Ceph cluster it usually answers); the others together, so a
    cluster without Ceph costs one read per node in two rounds, not one round per node.
    """
    failed: PveError | None = None
    for batch in (online[:1], online[1:]):
        got = await gather(client, [(n, api_path("nodes", node_seg(n), "ceph", "status"), {}) for n in batch])
        for n in batch:
            answer = got[n]
            if not isinstance(answer, PveError):
                return n, answer if isinstance(answer, dict) else {}, None
            if failed is None and not ceph_absent(answer):
                failed = answer
    return None, None, failed


async def read_ceph(client: ProxmoxClient, online: list[str]) -> tuple[CephData | None, list[Missing]]:
    """The Ceph payloads, or None when the cluster has no Ceph or its status could not be read."""
    if not online:
        return await _read_without_nodes(client)
    node, status, err = await ceph_node(client, online)
    if err is not None:
        return None, [_missing("Ceph status", err, None)]
    if node is None or status is None:
        return None, []
    data = CephData(status=status, node=node)
    seg = node_seg(node)
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
            missing.append(_missing(f"Ceph {key.replace('_', ' ')}", value, node))
        else:
            setattr(data, key, value)
    return data, missing


async def _read_without_nodes(client: ProxmoxClient) -> tuple[CephData | None, list[Missing]]:
    """No node is online: only the API node's /cluster/ceph/status can say anything."""
    status = (await gather(client, [("status", api_path("cluster", "ceph", "status"), {})]))["status"]
    if isinstance(status, PveError):
        return None, ([] if ceph_absent(status) else [_missing("Ceph status", status, None)])
    return CephData(status=status), [
        Missing("Ceph OSDs, pools and monitors", "/nodes/{node}/ceph", "no node is online", affects=("ceph",))
    ]


def _missing(what: str, err: PveError, node: str | None) -> Missing:
    denied = isinstance(err, PvePermissionError)
    # a /cluster/ceph read on an API node without Ceph, while another node has it
    hint = f" ({API_NODE_HINT})" if ceph_absent(err) else ""
    return Missing(
        what=what + (" (optional: needs Sys.Audit)" if denied else ""),
        path=err.path or "/cluster/ceph",
        error=err.message + hint,
        node=node,
        status=err.status,
        affects=("ceph",),
        optional=denied,
    )


async def read_node_ceph(client: ProxmoxClient, node: str) -> NodeCeph | None:
    """For an evacuation: the node's OSDs, monitors and MDS, the flags, and Ceph's ok-to-stop for each daemon.

    None when the node has no Ceph (its /nodes/{node}/ceph/status says not installed: no daemon of it
    can run there) or runs no Ceph daemon. A failed read becomes the daemon's answer "could not ask"
    (the plan says so), never "safe".
    """
    seg = node_seg(node)
    status = (await gather(client, [("status", api_path("nodes", seg, "ceph", "status"), {})]))["status"]
    if isinstance(status, PveError) and ceph_absent(status):
        return None
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
    if isinstance(got["flags"], PveError):  # the API node may lack Ceph: the OSD tree carries the flags too
        c.flags = tree_flags(c.osd_tree)
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


def tree_flags(tree: object) -> list[dict[str, object]]:
    """``/nodes/{n}/ceph/osd``'s ``flags`` (osd dump flags, "we want this for the noout flag": Ceph/OSD.pm
    index) as /cluster/ceph/flags rows of the set flags."""
    text = tree.get("flags") if isinstance(tree, dict) else None
    names = [f.strip() for f in text.split(",")] if isinstance(text, str) else []
    return [{"name": name, "value": 1} for name in names if name]


def _mgrmap(status: object) -> dict[str, object]:
    """``mgr dump`` as PVE re-adds it to the status (PVE/Ceph/Tools.pm ceph_cluster_status)."""
    mgrmap = status.get("mgrmap") if isinstance(status, dict) else None
    return mgrmap if isinstance(mgrmap, dict) else {}
