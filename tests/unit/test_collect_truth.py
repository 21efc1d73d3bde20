"""What the collector reads and how it reads PVE's answers: HA rules vs groups per release, the guest-agent
probe's errors, the vzdump defaults behind retention, and get_task's end time (FakeClient, PVE-shaped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pve_steward.config import load_settings
from pve_steward.errors import PveApiError, PveError, PvePermissionError, PveUnavailable
from pve_steward.server import build_server
from pve_steward.testing import FakeClient
from pve_steward.tools.collect import collect
from tests.unit.pve_fixtures import NOW, cluster_status, guest_row, node_row, qemu_config, storage_cfg, task

pytestmark = pytest.mark.anyio

MIGRATED = PveApiError(
    "GET /cluster/ha/groups failed: cannot index groups: ha groups have been migrated to rules", status=500
)


def _cluster(version: str | PveError, guests: list[dict[str, Any]] | None = None) -> FakeClient:
    fake = FakeClient()
    fake.on("GET", "/version", version if isinstance(version, PveError) else {"version": version, "release": "x"})
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True, "pve2": True}))
    fake.on("GET", "/cluster/resources", [node_row("pve1"), node_row("pve2"), *(guests or [])])
    fake.on("GET", "/storage", [storage_cfg("pbs", "pbs", "backup"), storage_cfg("local", "dir", "iso,backup")])
    fake.on("GET", "/cluster/ha/status/current", [])
    fake.on("GET", "/cluster/ha/resources", [])
    fake.on("GET", "/cluster/ha/rules", [{"rule": "r", "type": "node-affinity", "resources": "vm:1", "nodes": "a"}])
    fake.on("GET", "/cluster/ha/groups", MIGRATED)
    return fake


@pytest.mark.parametrize(
    ("version", "rules", "groups"),
    [("9.1.2", True, False), ("8.4.14", False, True)],
)
async def test_ha_constraints_read_rules_on_9_and_groups_on_8(version: str, rules: bool, groups: bool) -> None:
    fake = _cluster(version)
    if version.startswith("8"):
        fake.on("GET", "/cluster/ha/groups", [{"group": "g", "nodes": "pve1", "restricted": 1, "type": "group"}])
    d = await collect(fake, NOW, ["ha"])
    asked = fake.requested("GET")
    assert ("GET /cluster/ha/rules" in asked) is rules and ("GET /cluster/ha/groups" in asked) is groups
    assert d.missing == []
    assert bool(d.ha_rules) is rules and bool(d.ha_groups) is groups


async def test_unknown_release_reads_both_and_neither_pve_answer_is_a_gap() -> None:
    """Version unreadable: the PVE 9 groups 500 and a PVE 8 rules 501 are what those releases answer."""
    fake = _cluster(PveUnavailable("GET /version: timed out"))
    d = await collect(fake, NOW, ["ha"])
    assert d.ha_rules and [m.path for m in d.missing if "ha" in m.affects] == []
    fake.on("GET", "/cluster/ha/groups", PveApiError("GET /cluster/ha/groups failed: boom", status=500))
    broken = await collect(fake, NOW, ["ha"])
    assert [m.what for m in broken.missing if "ha" in m.affects] == ["cluster data (HA groups)"]


async def test_agent_probe_only_pves_not_running_answer_is_a_verdict() -> None:
    """qemu-server Agent.pm assert_agent_available: 'QEMU guest agent is not running' after a failed ping."""
    guests = [guest_row(v, "pve1") for v in (100, 101, 102, 103, 104)]
    fake = _cluster("9.1.2", guests)
    answers: dict[int, Any] = {
        100: {"result": {"version": "9.2.0"}},
        101: PveApiError("GET ... failed: QEMU guest agent is not running", status=500),
        102: PvePermissionError("Permission check failed (/vms/102, VM.GuestAgent.Audit)"),
        103: PveUnavailable("node unreachable for GET ...: No route to host", status=595),
        104: PveApiError("GET ... failed: VM 104 is not running", status=500),
    }
    for vmid, answer in answers.items():
        fake.on("GET", f"/nodes/pve1/qemu/{vmid}/config", qemu_config(f"g{vmid}", agent="1"))
        fake.on("GET", f"/nodes/pve1/qemu/{vmid}/agent/info", answer)
    fake.on("GET", "/nodes/{node}/tasks", [])
    fake.on("GET", "/nodes/pve1/qemu/100/agent/get-fsinfo", {"result": []})  # asked of answering agents only
    eth0 = [{"name": "eth0", "hardware-address": "bc:24:11:00:00:01", "ip-addresses": [{"ip-address": "10.0.0.9"}]}]
    fake.on("GET", "/nodes/pve1/qemu/100/agent/network-get-interfaces", {"result": eth0})
    d = await collect(fake, NOW, ["guests"], agent_probe_limit=10)
    assert d.agent == {100: True, 101: False}
    assert d.agent_interfaces == {100: eth0} and d.agent_fsinfo == {100: []}
    asked = sorted(c[1] for c in fake.calls if "/agent/" in c[1] and not c[1].endswith("/info"))
    assert asked == ["/nodes/pve1/qemu/100/agent/get-fsinfo", "/nodes/pve1/qemu/100/agent/network-get-interfaces"]
    skipped = [m for m in d.missing if m.optional]
    assert len(skipped) == 1 and skipped[0].status == 403 and "VM.GuestAgent.Audit" in skipped[0].error
    failed = [m for m in d.missing if not m.optional]
    assert [(m.status, m.what) for m in failed] == [(595, "guest-agent state of VM 103")]


async def test_vzdump_defaults_read_per_node_for_jobs_that_do_not_settle_retention() -> None:
    fake = _cluster("9.1.2")
    jobs = [
        {"id": "pbs-job", "storage": "pbs", "all": 1, "enabled": 1},  # PBS too: vzdump prunes it alike
        {"id": "local-job", "storage": "local", "all": 1, "enabled": 1},
        {"id": "pinned", "storage": "local", "all": 1, "enabled": 1, "node": "pve2"},
        {"id": "settled", "storage": "local", "all": 1, "enabled": 1, "remove": 1, "prune-backups": "keep-last=2"},
        {"id": "off", "storage": "local", "all": 1, "enabled": 0},
    ]
    fake.on("GET", "/cluster/backup", jobs).on("GET", "/cluster/backup-info/not-backed-up", [])
    fake.on("GET", "/nodes/{node}/storage/{storage}/content", [])
    fake.on("GET", "/nodes/{node}/tasks", [])
    fake.on("GET", "/nodes/{node}/vzdump/defaults", lambda p: {"storage": p["storage"], "prune-backups": "keep-all=1"})
    d = await collect(fake, NOW, ["backups"])
    reads = sorted((path, params["storage"]) for m, path, params in fake.calls if path.endswith("/vzdump/defaults"))
    assert reads == [(f"/nodes/{n}/vzdump/defaults", s) for n in ("pve1", "pve2") for s in ("local", "pbs")]
    assert set(d.vzdump_defaults) == {"pve1@local", "pve2@local", "pve1@pbs", "pve2@pbs"}


async def test_jobs_without_storage_read_each_nodes_own_vzdump_default() -> None:
    """PVE/API2/VZDump.pm defaults without ``storage`` answers /etc/vzdump.conf's storage (else 'local') with its
    prune-backups folded in; where VZDump.pm storage_info refuses it, the refusal names the storage a job without
    storage writes to. Each node has its own vzdump.conf; a job with ``node`` runs there alone."""
    fake = _cluster("9.1.2")
    jobs = [
        {"id": "bare", "all": 1, "enabled": 1},
        {"id": "bare-pinned", "all": 1, "enabled": 1, "node": "pve2"},
        {"id": "bare-off", "all": 1, "enabled": 0, "node": "pve3"},
        {"id": "to-pbs", "storage": "pbs", "all": 1, "enabled": 1},  # its retention is no business of storage's
    ]
    fake.on("GET", "/cluster/backup", jobs).on("GET", "/cluster/backup-info/not-backed-up", [])
    fake.on("GET", "/nodes/{node}/storage/{storage}/content", []).on("GET", "/nodes/{node}/tasks", [])
    refusal = PveApiError(
        "GET /nodes/pve2/vzdump/defaults failed: can't use storage 'iso' for backups - wrong content type",
        status=500,
        path="/nodes/pve2/vzdump/defaults",
    )

    fake.on("GET", "/nodes/pve2/vzdump/defaults", refusal)
    fake.on("GET", "/nodes/{node}/vzdump/defaults", {"storage": "pbs", "prune-backups": "keep-last=3"})
    d = await collect(fake, NOW, ["storage"])  # the storage area alone reads them too (where such jobs write)
    reads = sorted((path, params) for _m, path, params in fake.calls if path.endswith("/vzdump/defaults"))
    assert reads == [("/nodes/pve1/vzdump/defaults", {}), ("/nodes/pve2/vzdump/defaults", {})]
    assert d.vzdump_storage == {"pve1": "pbs", "pve2": "iso"}
    assert d.vzdump_defaults == {"pve1@": {"storage": "pbs", "prune-backups": "keep-last=3"}}
    assert [(m.path, m.affects) for m in d.missing] == [("/nodes/pve2/vzdump/defaults", ("backups", "pbs"))]
    for n in ("pve1", "pve2"):
        fake.on("GET", f"/nodes/{n}/vzdump/defaults", PvePermissionError("Permission check failed", status=403, path=n))
    denied = await collect(fake, NOW, ["storage"])
    assert denied.vzdump_storage == {} and {m.affects for m in denied.missing} == {("backups", "pbs", "storage")}


async def test_the_few_cluster_and_storage_reads_go_ahead_of_the_per_guest_ones() -> None:
    """The pool takes reads in the order asked: HA rules asked after a thousand configs were the whole last round
    trip of an evacuation's read phase (bench_planner, issue 17)."""
    guests = [guest_row(v, "pve1" if v % 2 else "pve2") for v in range(100, 140)]
    fake = _cluster("9.1.2", guests)
    fake.on("GET", "/cluster/backup", [{"id": "daily", "storage": "local", "all": 1, "enabled": 1}])
    fake.on("GET", "/cluster/backup-info/not-backed-up", []).on(
        "GET", "/access/permissions", {"/": {"Datastore.Allocate": 1}}
    )
    fake.on("GET", "/nodes/{node}/storage/{storage}/content", []).on("GET", "/nodes/{node}/tasks", [])
    fake.on("GET", "/nodes/{node}/vzdump/defaults", lambda p: {"storage": p["storage"], "prune-backups": "keep-all=1"})
    fake.on("GET", "/nodes/{node}/qemu/{vmid}/config", qemu_config("g"))
    fake.on("GET", "/nodes/{node}/qemu/{vmid}/migrate", {"running": 1, "local_disks": [], "local_resources": []})
    d = await collect(fake, NOW, ["ha", "backups", "migration"], preconditions=True)
    asked = fake.requested("GET")
    per_guest = [i for i, call in enumerate(asked) if call.endswith(("/config", "/migrate"))]
    few = [i for i, call in enumerate(asked) if call.endswith(("/ha/rules", "/content", "/vzdump/defaults"))]
    assert len(per_guest) == 80 and len(few) >= 4 and max(few) < min(per_guest)
    assert len(d.configs) == 40 and d.ha_rules


async def test_get_task_takes_endtime_from_the_task_index(tmp_path: Path) -> None:
    """Tasks.pm read_task_status has no endtime; node_tasks rows have it."""
    row = task("pve1", "vzdump", "", 3600, duration=300)
    status = {k: row[k] for k in ("upid", "node", "pid", "pstart", "starttime", "type", "id", "user")}
    fake = FakeClient()
    fake.on("GET", "/nodes/pve1/tasks/{upid}/status", dict(status, status="stopped", exitstatus="OK"))
    fake.on("GET", "/nodes/pve1/tasks/{upid}/log", [{"n": 1, "t": "TASK OK"}])
    fake.on("GET", "/nodes/pve1/tasks", lambda p: [row] if p["since"] <= row["starttime"] <= p["until"] else [])
    mcp = build_server(
        load_settings(url="pve.invalid:8006", audit_log=tmp_path / "audit.jsonl", granular_tools=True),
        client=fake,
        check_version_on_start=False,
    )
    async with Client(mcp) as c:
        result = await c.call_tool("get_task", {"upid": row["upid"]})
    detail = result.structured_content
    assert detail is not None and detail["task"]["duration_s"] == 300 and detail["task"]["ended"] is not None
    fake.on("GET", "/nodes/pve1/tasks", [])  # rotated out of the index: no invented end time
    async with Client(mcp) as c:
        rotated = (await c.call_tool("get_task", {"upid": row["upid"]})).structured_content
    assert rotated is not None and rotated["task"]["ended"] is None and rotated["task"]["state"] == "ok"


async def test_a_health_check_reads_each_thing_once_and_each_area_gets_its_own_copy() -> None:
    """Areas that need the same endpoint share one read per check, even when the read cache's TTL lapses
    during a long check (issue 17); a repeat is a copy, so one area's analysis cannot change another's data."""
    from pve_steward.analysis.health import AREAS

    fake = _cluster("9.1.2", [guest_row(100, "pve1"), guest_row(101, "pve2")])
    fake.on("GET", "/nodes/pve1/status", {"memory": {"total": 64 << 30, "used": 8 << 30}, "cpuinfo": {"cpus": 16}})
    fake.on("GET", "/nodes/pve1/qemu/100/config", qemu_config("web"))
    fake.on("GET", "/nodes/pve2/qemu/101/config", qemu_config("db"))
    d = await collect(fake, NOW, list(AREAS))
    calls = [(m, p, repr(sorted(params.items()))) for m, p, params in fake.calls]
    repeated = sorted({c[1] for c in calls if calls.count(c) > 1})
    assert repeated == [], f"read more than once in one check: {repeated}"
    assert d.reads["node_status"]["pve1"] == d.node_status["pve1"], "both areas got the answer"
    assert d.reads["node_status"]["pve1"] is not d.node_status["pve1"], "each its own copy"


async def test_each_vmid_without_a_guest_is_asked_whether_it_would_be_visible() -> None:
    """A backup whose vmid is not in /cluster/resources: where the privilege map cannot settle whether such a
    guest would be listed (no ACL tree to show a NoAccess entry on /vms/N: no Sys.Audit on /access), the token's
    own permissions on /vms/N are asked. At most PROBE_LIMIT, then a gap; the rest stay 'cannot tell'."""
    from pve_steward.pve.visibility import GUESTS
    from pve_steward.tools.privileges import PROBE_LIMIT

    fake = _cluster("9.1.2", [guest_row(100, "pve1")])
    rows = [
        {"volid": f"local:backup/vzdump-qemu-{v}-x.vma.zst", "vmid": v, "ctime": 1, "subtype": "qemu"}
        for v in range(1000, 1000 + PROBE_LIMIT + 2)
    ]
    fake.on("GET", "/cluster/backup", []).on("GET", "/cluster/backup-info/not-backed-up", [])
    fake.on("GET", "/nodes/{node}/storage/{storage}/content", rows)
    fake.on("GET", "/nodes/{node}/tasks", [])
    every = {"Sys.Audit": 1, "Datastore.Allocate": 1, "VM.Audit": 1, "VM.Backup": 1, "Datastore.AllocateSpace": 1}
    fake.on(
        "GET",
        "/access/permissions",
        lambda p: (
            {p["path"]: {"VM.Audit": 1} if p["path"] != "/vms/1001" else {}}
            if "path" in p
            else {path: dict(every) for path in ("/", "/nodes", "/storage", "/vms")}
        ),
    )
    d = await collect(fake, NOW, ["backups"])
    asked = [c[2]["path"] for c in fake.calls if c[1] == "/access/permissions" and "/vms/" in c[2].get("path", "")]
    assert len(asked) == PROBE_LIMIT and asked[0] == "/vms/1000"
    assert d.sees(GUESTS, 1000) is True and d.sees(GUESTS, 1001) is False
    assert d.sees(GUESTS, 1000 + PROBE_LIMIT + 1) is None  # not asked: cannot tell
    assert any("not asked: too many" in m.error for m in d.missing)
