"""Lists PVE filters by privilege (Need.visible_with): the collector asks /access/permissions once and skips a
list the token would see only part of, as CHECK_SKIPPED naming the privilege (FakeClient, PVE-shaped)."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.checks.access import root_tfa
from pve_steward.analysis.data import incomplete_findings
from pve_steward.analysis.migration.verdict import assess
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.errors import PvePermissionError, PveUnavailable
from pve_steward.testing import FakeClient
from pve_steward.tools.collect import collect
from tests.unit.pve_fixtures import NOW, cluster_status, guest_row, node_row, qemu_config

pytestmark = pytest.mark.anyio

AUDITOR = {"/": {"Sys.Audit": 1}, "/access": {"Sys.Audit": 1}, "/access/groups": {"Sys.Audit": 1}}
VMS_ONLY = {"/vms": {"VM.Audit": 1}}
ROOT_NO_TFA = [{"userid": "root@pam", "enable": 1, "expire": 0, "realm-type": "pam", "email": "root@example.com"}]


def _cluster(permissions: Any) -> FakeClient:
    fake = FakeClient()
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True}))
    fake.on("GET", "/cluster/resources", [node_row("pve1")])
    fake.on("GET", "/storage", [])
    fake.on("GET", "/access/permissions", permissions)
    fake.on("GET", "/access/users", ROOT_NO_TFA)
    fake.on("GET", "/access/tfa", [])
    fake.on("GET", "/access/acl", [])
    fake.on("GET", "/access/groups", [])
    fake.on("GET", "/access/roles", [])
    fake.on("GET", "/access/domains", [{"realm": "pam", "type": "pam"}])
    fake.on("GET", "/pools", [])
    return fake


async def test_a_token_that_sees_the_whole_list_reads_it() -> None:
    fake = _cluster(AUDITOR)
    d = await collect(fake, NOW, ["access"])
    asked = fake.requested("GET")
    assert asked.count("GET /access/permissions") == 1 and "GET /access/users" in asked
    assert ("GET", "/access/users", {"full": 1}) in fake.calls
    assert [f.code for f in root_tfa(d, Thresholds())] == ["ACCESS_ROOT_NO_TFA"]
    assert [m.path for m in d.missing_for("access")] == ["/pools"]  # no Pool.Audit on /pool in AUDITOR: skipped


async def test_a_token_that_would_see_part_of_a_list_is_skipped_naming_the_privilege() -> None:
    fake = _cluster(VMS_ONLY)
    d = await collect(fake, NOW, ["access"])
    asked = fake.requested("GET")
    assert "GET /access/users" not in asked and "GET /access/roles" in asked
    assert d.read("access_acl") is None  # PVE answers /access/acl with part of it: read for the privileges alone
    gaps = {f.subject.id: f for f in incomplete_findings(d, "access")}
    assert gaps["/access/users"].code == "CHECK_SKIPPED"
    assert "Sys.Audit or User.Modify on /access/groups" in gaps["/access/users"].message
    assert root_tfa(d, Thresholds()) == []  # no verdict on a list it did not read


async def test_unreadable_own_privileges_are_a_gap_not_a_pass() -> None:
    fake = _cluster(PveUnavailable("GET /access/permissions: timed out", path="/access/permissions"))
    d = await collect(fake, NOW, ["access"])
    gaps = {f.subject.id: f.code for f in incomplete_findings(d, "access")}
    assert gaps and set(gaps.values()) == {"DATA_INCOMPLETE"} and "GET /access/users" not in fake.requested()


# ---------------------------------------------------------------- the first wave's lists (pve/visibility.py)


def _guests_cluster(permissions: Any) -> FakeClient:
    """A token's view of a one-node cluster with guest 100 on ceph-vm, which /storage may or may not list."""
    fake = _cluster(permissions)
    fake.on("GET", "/cluster/resources", [node_row("pve1"), node_row("pve2"), guest_row(100, "pve1")])
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True, "pve2": True}))
    fake.on("GET", "/nodes/{node}/qemu/{vmid}/config", qemu_config("web"))
    fake.on("GET", "/nodes/{node}/tasks", [])
    fake.on("GET", "/cluster/ha/status/current", [])
    fake.on("GET", "/cluster/ha/resources", [])
    fake.on("GET", "/cluster/ha/rules", [])
    fake.on("GET", "/cluster/replication", [])
    return fake


MONITOR = {
    p: {"Sys.Audit": 1, "VM.Audit": 1, "Datastore.Audit": 1, "Pool.Audit": 1, "SDN.Audit": 1}
    for p in ("/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms")
}


async def test_a_refused_list_is_said_as_not_visible_and_read_as_unread_not_empty() -> None:
    fake = _guests_cluster({"/vms": {"VM.Audit": 1}, "/nodes": {"Sys.Audit": 1}})
    fake.on(
        "GET", "/cluster/backup", PvePermissionError("Permission check failed (/, Sys.Audit)", path="/cluster/backup")
    )
    d = await collect(fake, NOW, ["backups"])
    assert "backup_jobs" in d.unread
    gap = next(m for m in d.missing if m.path == "/cluster/backup")
    assert gap.optional and gap.hidden and gap.what == "backup jobs"
    assert gap.error == "not visible to this token: PVE lists them only with Sys.Audit on / (/cluster/backup)"


async def test_a_node_task_list_that_would_show_only_own_tasks_is_not_read() -> None:
    """pve-manager Tasks.pm node_tasks: every task only with Sys.Audit on the node, else the caller's own."""
    perms = {**MONITOR, "/nodes/pve2": {"VM.Audit": 1}}  # an ACL on pve2 without Sys.Audit
    fake = _guests_cluster(perms)
    d = await collect(fake, NOW, ["guests"])
    assert [c[1] for c in fake.calls if c[1].endswith("/tasks")] == ["/nodes/pve1/tasks"]
    assert "tasks:pve2" in d.unread and "tasks:pve1" not in d.unread
    gap = next(m for m in d.missing if m.path == "/nodes/pve2/tasks")
    assert "Sys.Audit on /nodes/pve2" in gap.error and gap.optional


async def test_a_storage_a_guest_names_is_asked_about_when_the_map_cannot_settle_it() -> None:
    """No ACL tree (no Sys.Audit on /access): whether /storage/ceph-vm is hidden by an ACL of its own is asked
    (?path=); the answer decides between 'not visible' and 'does not exist'."""
    map_only = {p: v for p, v in MONITOR.items() if p not in ("/access", "/access/groups")}

    def answer(hidden: bool) -> Any:
        def perms(p: dict[str, Any]) -> Any:
            if "path" in p:
                return {p["path"]: {} if hidden else {"Datastore.Audit": 1}}
            return map_only

        return perms

    for hidden in (True, False):
        fake = _guests_cluster(answer(hidden))
        d = await collect(fake, NOW, ["migration"])
        assert ("GET", "/access/permissions", {"path": "/storage/ceph-vm"}) in fake.calls
        gaps = [m for m in d.missing if m.path == "/storage/ceph-vm"]
        (why,) = assess(d, 100).blocking
        if hidden:
            assert gaps and "Datastore.Audit or Datastore.AllocateSpace on /storage/ceph-vm" in gaps[0].error
            assert why.code == "MIGRATE_NOT_PROVABLE"
        else:
            assert gaps == [] and why.code == "MIGRATE_STORAGE_UNAVAILABLE"


async def test_with_own_privileges_unread_a_shortened_list_is_a_failed_read() -> None:
    fake = _guests_cluster(PveUnavailable("GET /access/permissions: timed out", path="/access/permissions"))
    d = await collect(fake, NOW, ["migration"])
    by_path = {m.path: m for m in d.missing}
    assert not by_path["/access/permissions"].optional
    assert not by_path["/cluster/resources"].optional and "cannot tell" in by_path["/cluster/resources"].error
    assert assess(d, 100).blocking[0].code == "MIGRATE_NOT_PROVABLE"  # ceph-vm: hidden or gone, cannot tell
