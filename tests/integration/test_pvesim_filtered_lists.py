"""pvesim filters lists as PVE does, for the scoped tokens (pvesim SCOPED_TOKENS) through proxmoxer: the rows a
token sees and the privilege map it reads its view from (design record 261206-55)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pvesim
from pvesim.server import SimServer
from tests.integration.pve import api


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    server = SimServer(pvesim.build_cluster({**pvesim.load_scenario("demo"), "scoped_tokens": True}, speed=500.0))
    yield server.start()
    server.stop()


def test_node_rows_stay_without_sys_audit_and_lose_their_figures(sim: SimServer) -> None:
    """pve-manager Cluster.pm resources / Nodes.pm index: every node, its figures only with Sys.Audit on it
    (API2Tools.pm extract_node_stats)."""
    rows = {r["node"]: r for r in api(sim, "vmonly@pve!mcp").cluster.resources.get(type="node")}
    assert set(rows) == {"pve1", "pve2", "pve3"} and rows["pve1"]["status"] == "online"
    assert not {"maxmem", "mem", "maxcpu", "cpu", "uptime"} & set(rows["pve1"])
    hidden = {r["node"]: r for r in api(sim, "hiddennode@pve!mcp").cluster.resources.get(type="node")}
    assert "maxmem" in hidden["pve1"] and "maxmem" not in hidden["pve2"] and hidden["pve2"]["status"] == "online"


def test_storage_rows_of_resources_need_datastore_audit_alone(sim: SimServer) -> None:
    """/storage shows a storage with Datastore.AllocateSpace too; /cluster/resources only with Datastore.Audit."""
    some = api(sim, "somestorage@pve!mcp")
    assert [s["storage"] for s in some.storage.get()] == ["local"]
    assert {r["storage"] for r in some.cluster.resources.get(type="storage")} == {"local"}
    operator = api(sim, "operator@pve!mcp")  # PVEAuditor on / (Datastore.Audit) and PVEDatastoreUser on /storage
    assert {r["storage"] for r in operator.cluster.resources.get(type="storage")} >= {"local", "ceph-vm"}


def test_cluster_tasks_need_sys_audit_on_root_and_a_token_never_sees_its_own(sim: SimServer) -> None:
    """pve-manager Cluster.pm tasks: with Sys.Audit on / every task, else the caller's own, compared after a token
    task's user is split from its token id, so a token sees none."""
    assert api(sim, "root@pam!pvesim").cluster.tasks.get()
    assert api(sim, "noroot@pve!mcp").cluster.tasks.get() == []
    assert api(sim, "noroot@pve!mcp").nodes("pve1").tasks.get(limit=5)  # the node's list: Sys.Audit on the node


def test_the_privilege_map_lists_every_acl_path_and_pool_member(sim: SimServer) -> None:
    """RPCEnvironment.pm get_effective_permissions: default paths, every ACL path (anyone's), pool members; a path
    where the caller holds nothing is left out (so a NoAccess entry shows only in the ACL tree)."""
    pve = api(sim, "hiddenguest@pve!mcp")
    perms = pve.access.permissions.get()
    acl_paths = {a["path"] for a in pve.access.acl.get()}
    assert "/vms/101" in acl_paths and "/vms/101" not in perms
    assert {p for p in acl_paths if p not in perms} == {"/vms/101"}
    assert pve.access.permissions.get(path="/vms/101") == {"/vms/101": {}}
    assert 101 not in {r["vmid"] for r in pve.cluster.resources.get(type="vm")}


def test_pools_are_filtered_in_the_index_but_not_by_id(sim: SimServer) -> None:
    """pve-manager Pool.pm index: the list holds pools with Pool.Audit on /pool/<id>; asked by ``poolid`` it
    answers whatever the caller holds (``check(..., 1)``, its result unused)."""
    assert [p["poolid"] for p in api(sim, "vmonly@pve!mcp").pools.get()] == []
    assert [p["poolid"] for p in api(sim, "vmonly@pve!mcp").pools.get(poolid="archive")] == ["archive"]
    root = api(sim, "root@pam!pvesim")
    listed = {r["pool"] for r in root.cluster.resources.get() if r["type"] == "pool"}
    assert listed == {p["poolid"] for p in root.pools.get()}  # every pool of user.cfg, with guests or not
