"""pvesim through the real proxmoxer over HTTPS: reads, writes as tasks, errors as PVE gives them."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from proxmoxer import ResourceException

import pvesim
import pvesim.server
from pvesim.generator import generate
from pvesim.server import SimServer
from tests.conftest import wait_task
from tests.integration.pve import api, control


def _finish(pve, node: str, upid: str) -> dict:
    return wait_task(pve.nodes(node).tasks(upid).status.get)


# ---------------------------------------------------------------- reads


def test_every_read_endpoint_answers(demo_sim: SimServer) -> None:
    pve = api(demo_sim)
    assert pve.version.get()["release"] == "9.1"
    status = pve.cluster.status.get()
    assert status[0]["type"] == "cluster" and status[0]["quorate"] == 1
    # "network": PVE 9.1's SDN zone and fabric status rows (pve-manager 9.0.12+); "pool": every pool of user.cfg
    # (the demo's 'archive' holds no guest), Cluster.pm resources
    types = {r["type"] for r in pve.cluster.resources.get()}
    assert types == {"node", "qemu", "lxc", "storage", "network", "pool"}
    assert {r["type"] for r in pve.cluster.resources.get(type="node")} == {"node"}
    assert pve.cluster.tasks.get()
    assert {e["type"] for e in pve.cluster.ha.status.current.get()} >= {"quorum", "master", "lrm", "service"}
    assert pve.cluster.ha.status.manager_status.get()["manager_status"]["master_node"] == "pve2"
    assert {r["sid"] for r in pve.cluster.ha.resources.get()} == {"vm:101", "vm:102", "ct:122"}
    assert pve.cluster.ha.resources("vm:102").get()["comment"] == "primary database"
    with pytest.raises(ResourceException, match="migrated to rules"):  # PVE 9, groups.cfg empty (Groups.pm)
        pve.cluster.ha.groups.get()
    assert {r["rule"] for r in pve.cluster.ha.rules.get()} == {"ha-web", "ha-db"}
    assert {j["id"] for j in pve.cluster.backup.get()} == {"backup-nightly", "backup-weekly-local"}
    assert [g["vmid"] for g in pve.cluster("backup-info")("not-backed-up").get()] == [114, 9000]
    assert pve.cluster.replication.get()[0]["id"] == "112-0"
    assert pve.cluster.options.get()["ha"]["shutdown_policy"] == "conditional"
    assert {s["storage"] for s in pve.storage.get()} >= {"local", "local-lvm", "ceph-vm", "pbs-main"}
    assert [n["node"] for n in pve.nodes.get()] == ["pve1", "pve2", "pve3"]
    node = pve.nodes("pve3")
    st = node.status.get()
    assert st["memory"]["total"] == 64 * 1024**3 and st["cpuinfo"]["cpus"] == 16
    assert {g["vmid"] for g in node.qemu.get()} == {111, 112, 113, 114, 115}
    assert [g["vmid"] for g in node.lxc.get()] == ["124"]  # PVE gives CT vmids as strings here
    cfg = node.qemu(111).config.get()
    assert cfg["lock"] == "backup" and len(cfg["digest"]) == 40 and cfg["cores"] == 8
    assert node.qemu(115).status.current.get()["ha"] == {"managed": 0}
    assert [s["name"] for s in node.qemu(113).snapshot.get()] == ["before_migration", "current"]
    assert node.lxc(124).config.get()["hostname"] == "ci-cache"
    assert node.lxc(124).status.current.get()["status"] == "running"
    lvm = node.storage("local-lvm").status.get()
    assert lvm["used"] / lvm["total"] > 0.9
    assert any(s["storage"] == "local-zfs" for s in node.storage.get())
    backups = pve.nodes("pve1").storage("pbs-main").content.get(content="backup", vmid=106)
    assert sorted(b["verification"]["state"] for b in backups) == ["failed", "ok"]
    assert node.tasks.get(errors=1)[0]["type"] == "qmstart"
    assert node.replication.get()[0]["fail_count"] == 24
    assert node.replication("112-0").status.get()["error"].startswith("command 'zfs snapshot")
    assert {c["filename"] for c in pve.nodes("pve1").certificates.info.get()} >= {"pveproxy-ssl.pem"}
    assert pve.nodes("pve2").apt.update.get()[0]["Package"] == "pve-manager"
    repos = pve.nodes("pve2").apt.repositories.get()
    assert {r["handle"]: r.get("status") for r in repos["standard-repos"]}["enterprise"] == 1
    assert pve.nodes("pve2").subscription.get()["status"] == "notfound"
    disks = node.disks.list.get()  # the scenario's two disks, and the NVMe drives pve3's OSDs 4 and 5 sit on
    assert [d["health"] for d in disks if d["devpath"].startswith("/dev/sd")] == ["PASSED", "FAILED"]
    assert {d["devpath"]: d.get("osdid") for d in disks if d["osdid"] >= 0} == {"/dev/nvme0n1": 4, "/dev/nvme1n1": 5}
    assert {p["name"]: p["health"] for p in node.disks.zfs.get()}["tank"] == "DEGRADED"
    with pytest.raises(ResourceException, match="QEMU guest agent is not running"):
        pve.nodes("pve2").qemu(110).agent.info.get()


def test_node_storage_rows_are_storage_info_rows(demo_sim: SimServer) -> None:
    """pve-storage Storage.pm storage_info + API2/Storage/Status.pm index/read_status: every storage.cfg entry
    on every node; enabled 0 where disabled or not in its nodes list, active 0 and zeros unless enabled and
    active; ?content= drops what is not enabled on the node; /status answers for a storage not on the node."""
    pve = api(demo_sim)
    rows = {r["storage"]: r for r in pve.nodes("pve2").storage.get()}
    assert set(rows) == {s["storage"] for s in pve.storage.get()}
    zeros = {"total": 0, "used": 0, "avail": 0, "active": 0}
    assert rows["local-zfs"] == {**rows["local-zfs"], **zeros, "enabled": 0}  # nodes pve1,pve3
    assert rows["nfs-archive"] == {**rows["nfs-archive"], **zeros, "enabled": 0, "shared": 1}  # disable 1
    assert rows["nfs-templates"] == {**rows["nfs-templates"], **zeros, "enabled": 1}  # not mounted on pve2
    assert not any("used_fraction" in rows[s] for s in ("local-zfs", "nfs-archive", "nfs-templates"))
    assert rows["ceph-vm"]["active"] == 1 and rows["ceph-vm"]["total"] > rows["ceph-vm"]["used"] > 0
    assert rows["ceph-vm"]["used_fraction"] == rows["ceph-vm"]["used"] / rows["ceph-vm"]["total"]
    assert "local-zfs" in {r["storage"] for r in pve.nodes("pve1").storage.get(content="images")}
    assert "local-zfs" not in {r["storage"] for r in pve.nodes("pve2").storage.get(content="images")}
    iso = {r["storage"] for r in pve.nodes("pve2").storage.get(content="iso")}
    assert iso == {"local", "nfs-iso"}  # not the disabled nfs-archive
    assert "nfs-archive" not in {r["storage"] for r in pve.nodes("pve2").storage.get(enabled=1)}
    assert "local-zfs" in {r["storage"] for r in pve.nodes("pve2").storage.get(enabled=1)}  # config disable only
    status = pve.nodes("pve2").storage("local-zfs").status.get()
    assert status == {**status, **zeros, "enabled": 0, "type": "zfspool"} and "storage" not in status
    for call in (
        pve.nodes("pve2").storage("nowhere").status.get,
        lambda: pve.nodes("pve2").storage.get(storage="local-zfs", content="images"),
    ):
        with pytest.raises(ResourceException) as exc:
            call()
        assert exc.value.status_code == 400 and exc.value.errors == {"storage": "No such storage."}


def test_storage_config_rows_carry_the_shared_flag_pve_sets(demo_sim: SimServer) -> None:
    """pve-storage Plugin.pm parse_config forces shared=1 on @SHARED_STORAGE types; Config.pm returns it."""
    shared = {s["storage"]: s.get("shared") for s in api(demo_sim).storage.get()}
    assert shared["nfs-iso"] == shared["pbs-main"] == shared["ceph-vm"] == 1
    assert shared["local"] is None and shared["local-lvm"] is None


def test_storage_config_gives_content_dirs_as_the_decoded_hash(start_sim) -> None:
    """Config.pm re-encodes only content and nodes: content-dirs stays the hash Plugin.pm decode_value built."""
    media = next(s for s in api(start_sim("upgrade")).storage.get() if s["storage"] == "media")
    assert media["content-dirs"] == {"iso": "shared", "vztmpl": "shared"}


def test_precondition_reports_local_disks_cdrom_and_devices(demo_sim: SimServer) -> None:
    pve = api(demo_sim)
    pre = pve.nodes("pve2").qemu(106).migrate.get()
    assert pre["running"] == 1
    assert {d["volid"]: d["cdrom"] for d in pre["local_disks"]} == {
        "local-lvm:vm-106-disk-0": 0,
        "local:iso/ubuntu-24.04.1-live-server-amd64.iso": 1,
    }
    assert pve.nodes("pve1").qemu(105).migrate.get()["local_resources"] == ["hostpci0"]
    zfs = pve.nodes("pve3").qemu(112).migrate.get()
    assert zfs["not_allowed_nodes"]["pve2"] == {"unavailable_storages": ["local-zfs"]}
    assert zfs["allowed_nodes"] == ["pve1"]
    ha = pve.nodes("pve1").qemu(102).migrate.get()
    assert ha["dependent-ha-resources"] == []
    with pytest.raises(ResourceException, match=r"VM is locked \(backup\)"):
        pve.nodes("pve3").qemu(111).migrate.get()


# ---------------------------------------------------------------- errors


def test_errors_look_like_pve(demo_sim: SimServer) -> None:
    pve = api(demo_sim)
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").qemu(100).status.start.post(skiplock=True)  # proxmoxer sends 'True'
    assert exc.value.status_code == 400
    assert exc.value.errors == {"skiplock": "type check ('boolean') failed - got 'True'"}
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").qemu(100).migrate.post(online=1)
    assert exc.value.errors == {"target": "property is missing and it is not optional"}
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").qemu(100).config.get(bogus=1)
    assert "does not allow additional properties" in exc.value.errors["bogus"]
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").qemu(99).config.get()
    assert exc.value.status_code == 400 and "minimum value of 100" in exc.value.errors["vmid"]
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").qemu(999).config.get()
    assert exc.value.status_code == 500
    assert exc.value.content == "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").bogus.get()
    assert exc.value.status_code == 501 and exc.value.content == "Method 'GET /nodes/pve1/bogus' not implemented"
    auditor = api(demo_sim, "auditor@pve!mcp")
    with pytest.raises(ResourceException) as exc:
        auditor.nodes("pve1").qemu(100).migrate.post(target="pve2", online=1)
    assert exc.value.status_code == 403
    assert exc.value.content == "Permission check failed (/vms/100, VM.Migrate)"
    with pytest.raises(ResourceException) as exc:
        auditor.nodes("pve2").apt.update.get()
    assert exc.value.content == "Permission check failed (/nodes/pve2, Sys.Modify)"
    perms = auditor.access.permissions.get()
    assert perms["/"]["VM.Audit"] == 1 and "VM.Migrate" not in perms["/"]


@pytest.mark.parametrize("protocol", ["httptools", "h11"])
def test_bad_token_is_401(protocol: str, monkeypatch: pytest.MonkeyPatch, start_sim: Any) -> None:
    """On either HTTP protocol pvesim serves with: httptools' with the dev extra, h11's without it."""
    if protocol == "h11":
        monkeypatch.setattr(pvesim.server, "_protocol", lambda: pvesim.server.ReasonH11Protocol)
    elif pvesim.server._httptools is None:
        pytest.fail("the dev extra installs httptools, which pvesim serves with")
    sim = start_sim("demo")
    assert isinstance(sim._server.config.http, type) and sim._server.config.http.__name__.lower().startswith(
        "reason" + protocol
    )
    full, _secret = sim.token("auditor@pve!mcp")
    session = requests.Session()
    session.trust_env = False
    url = f"{sim.url}/api2/json/version"
    bad = session.get(url, verify=str(sim.cert_path), headers={"Authorization": f"PVEAPIToken={full}=wrong"})
    none = session.get(url, verify=str(sim.cert_path))
    # pve-manager PVE/HTTPServer.pm auth_handler dies, and pve-http-server AnyEvent.pm answers the bare
    # HTTP::Response->new(401, $err): the reason phrase, no body
    assert (bad.status_code, bad.reason, bad.content) == (401, "Authentication failed!", b"")
    assert (none.status_code, none.reason, none.content) == (401, "No ticket", b"")


def test_offline_node_is_595_and_marked_offline(start_sim) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    with sim.sim.mutate() as c:
        c.nodes["pve3"].online = False
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve3").qemu.get()
    assert exc.value.status_code == 595
    assert {n["node"]: n["status"] for n in pve.nodes.get()}["pve3"] == "offline"
    assert {g["vmid"]: g["status"] for g in pve.cluster.resources.get(type="vm")}[111] == "unknown"
    assert pve.cluster.status.get()[3]["online"] == 0


def test_pve84_lacks_ha_rules_and_ct_precondition(start_sim) -> None:
    sim = start_sim("healthy", version="8.4.14")
    pve = api(sim)
    assert pve.version.get() == {"version": "8.4.14", "release": "8.4", "repoid": "0fcd7879", "console": "xtermjs"}
    for call in (pve.cluster.ha.rules.get, pve.nodes("hv1").lxc(210).migrate.get):
        with pytest.raises(ResourceException) as exc:
            call()
        assert exc.value.status_code == 501


# ---------------------------------------------------------------- tasks


def test_power_task_lifecycle_changes_state_only_at_the_end(start_sim) -> None:
    sim = start_sim("demo", speed=0.001)  # a task runs until the test finishes it (tasks/finish-all)
    pve = api(sim)
    upid = pve.nodes("pve2").qemu(109).status.start.post()
    assert upid.startswith("UPID:pve2:") and ":qmstart:109:root@pam!pvesim:" in upid
    assert pve.nodes("pve2").qemu(109).status.current.get()["status"] == "stopped"
    running = pve.nodes("pve2").tasks(upid).status.get()
    assert running["status"] == "running" and "exitstatus" not in running
    control(sim, "tasks/finish-all")
    done = _finish(pve, "pve2", upid)
    assert done["exitstatus"] == "OK"
    assert pve.nodes("pve2").qemu(109).status.current.get()["status"] == "running"
    log = [line["t"] for line in pve.nodes("pve2").tasks(upid).log.get()]
    assert log[-1] == "TASK OK"
    again_upid = pve.nodes("pve2").qemu(109).status.start.post()
    control(sim, "tasks/finish-all")
    again = _finish(pve, "pve2", again_upid)
    assert again["exitstatus"] == "VM 109 already running"


def test_migration_moves_guest_and_sets_lock_while_running(start_sim) -> None:
    sim = start_sim("demo", speed=0.001)  # a task runs until the test finishes it (tasks/finish-all)
    pve = api(sim)
    with pytest.raises(ResourceException, match="can't migrate running VM without --online"):
        pve.nodes("pve1").qemu(100).migrate.post(target="pve2")
    upid = pve.nodes("pve1").qemu(100).migrate.post(target="pve2", online=1)
    assert pve.nodes("pve1").qemu(100).config.get()["lock"] == "migrate"
    control(sim, "tasks/finish-all")
    assert _finish(pve, "pve1", upid)["exitstatus"] == "OK"
    assert {g["vmid"]: g["node"] for g in pve.cluster.resources.get(type="vm")}[100] == "pve2"
    assert "lock" not in pve.nodes("pve2").qemu(100).config.get()


@pytest.mark.parametrize(
    ("node", "vmid", "params", "error"),
    [
        ("pve1", 105, {"target": "pve2", "online": 1}, "can't migrate VM which uses local devices: hostpci0"),
        (
            "pve2",
            106,
            {"target": "pve1", "online": 1, "with-local-disks": 1},
            "can't migrate local disk 'local:iso/ubuntu-24.04.1-live-server-amd64.iso': local cdrom image",
        ),
        ("pve2", 108, {"target": "pve3", "online": 1}, "migration problems"),
    ],
)
def test_blocked_migrations_fail_inside_the_task(start_sim, node, vmid, params, error) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    status = _finish(pve, node, pve.nodes(node).qemu(vmid).migrate.post(**params))
    assert status["exitstatus"].startswith(error)
    assert {g["vmid"]: g["node"] for g in pve.cluster.resources.get(type="vm")}[vmid] == node


def test_storage_availability_is_checked_before_the_task(start_sim) -> None:
    """qemu-server migrate_vm runs check_storage_availability before forking the worker: HTTP 500."""
    pve = api(start_sim("demo"))
    with pytest.raises(ResourceException, match="storage 'local-zfs' is not available on node 'pve2'"):
        pve.nodes("pve3").qemu(112).migrate.post(target="pve2", online=1, **{"with-local-disks": 1, "force": 1})
    sim = start_sim("demo")
    pve = api(sim)
    with sim.sim.mutate() as c:  # the storage's nodes leave out the guest's own node: the source is checked first
        c.storages["local-zfs"].nodes = ["pve2"]
    with pytest.raises(ResourceException, match="storage 'local-zfs' is not available on node 'pve3'"):
        pve.nodes("pve3").qemu(112).migrate.post(target="pve2", online=1, **{"with-local-disks": 1, "force": 1})
    with sim.sim.mutate() as c:
        c.storages["local-zfs"].disable = True
    with pytest.raises(ResourceException, match="storage 'local-zfs' is disabled"):
        pve.nodes("pve3").qemu(112).migrate.post(target="pve2", online=1, **{"with-local-disks": 1, "force": 1})


def test_local_disk_needs_with_local_disks(start_sim) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    with sim.sim.mutate() as c:
        del c.guests[106].config["ide2"]
    first = _finish(pve, "pve2", pve.nodes("pve2").qemu(106).migrate.post(target="pve1", online=1))
    assert first["exitstatus"] == "can't live migrate attached local disks without with-local-disks option"
    ok = pve.nodes("pve2").qemu(106).migrate.post(target="pve1", online=1, **{"with-local-disks": 1})
    assert _finish(pve, "pve2", ok)["exitstatus"] == "OK"


def test_ha_guest_is_migrated_through_ha(start_sim) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    upid = pve.nodes("pve1").qemu(101).migrate.post(target="pve2", online=1)
    assert ":hamigrate:101:" in upid
    assert _finish(pve, "pve1", upid)["exitstatus"] == "OK"
    deadline = time.monotonic() + 120  # a loaded machine slows the simulated HA manager, never stops it
    while {g["vmid"]: g["node"] for g in pve.cluster.resources.get(type="vm")}[101] != "pve2":
        assert time.monotonic() < deadline, "HA never moved vm:101"
        time.sleep(0.05)
    tasks = [t for t in pve.cluster.tasks.get() if t["id"] == "101" and t["type"] == "qmigrate"]
    assert tasks and tasks[0]["user"] == "root@pam"
    reply = pve.cluster.ha.resources("ct:122").relocate.post(node="pve1")
    assert reply == {"sid": "ct:122", "requested-node": "pve1"}


def test_lxc_restart_migration(start_sim) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    with pytest.raises(ResourceException, match="without --online or --restart"):
        pve.nodes("pve1").lxc(120).migrate.post(target="pve2")
    assert _finish(pve, "pve1", pve.nodes("pve1").lxc(120).migrate.post(target="pve2", restart=1))["exitstatus"] == "OK"
    assert pve.nodes("pve2").lxc(120).status.current.get()["status"] == "running"
    bind = _finish(pve, "pve2", pve.nodes("pve2").lxc(123).migrate.post(target="pve1", restart=1))
    assert bind["exitstatus"] == "cannot migrate local bind mount point 'mp0'"


def test_snapshot_create_rollback_delete(start_sim) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    vm = pve.nodes("pve2").qemu(109)
    created = _finish(pve, "pve2", vm.snapshot.post(snapname="pre_patch", description="before patch"))
    assert created["exitstatus"] == "OK"
    names = [s["name"] for s in vm.snapshot.get()]
    assert names == ["pre_patch", "current"]
    vm.config.put(description="changed after snapshot", digest=vm.config.get()["digest"])
    assert _finish(pve, "pve2", vm.snapshot("pre_patch").rollback.post())["exitstatus"] == "OK"
    assert "description" not in vm.config.get()
    assert _finish(pve, "pve2", vm.snapshot("pre_patch").delete())["exitstatus"] == "OK"
    assert [s["name"] for s in vm.snapshot.get()] == ["current"]
    with pytest.raises(ResourceException, match="reserved name"):
        vm.snapshot.post(snapname="current")


def test_snapshots_pve_refuses_fail_their_task(start_sim) -> None:
    """AbstractConfig.pm __snapshot_prepare dies in the task: a template, a bind mount without the snapshot
    feature (Storage.pm volume_has_feature: undef for a path), and RAM that check_non_migratable_resources keeps."""
    sim = start_sim("demo")
    with sim.sim.mutate() as c:
        c.guests[109].config["virtiofs0"] = "share1"
    pve = api(sim)
    assert _finish(pve, "pve1", pve.nodes("pve1").qemu(9000).snapshot.post(snapname="s1"))["exitstatus"] == (
        "you can't take a snapshot if it's a template"
    )
    bind = _finish(pve, "pve2", pve.nodes("pve2").lxc(123).snapshot.post(snapname="s1"))
    assert bind["exitstatus"] == "snapshot feature is not available"
    ram = _finish(pve, "pve2", pve.nodes("pve2").qemu(109).snapshot.post(snapname="s1", vmstate=1))
    assert ram["exitstatus"] == "Cannot live-migrate, snapshot (with RAM), or hibernate a VM with: virtiofs"
    assert _finish(pve, "pve2", pve.nodes("pve2").qemu(109).snapshot.post(snapname="s1"))["exitstatus"] == "OK"


def test_disk_edits_show_in_the_next_answer(start_sim) -> None:
    """pvesim parses a guest's disks once while its config stays the same (design record 261204-41); an edit
    through the API or behind its back shows in the very next /cluster/resources and storage content."""
    sim = start_sim("demo")
    pve = api(sim)

    def maxdisk() -> int:
        return next(r["maxdisk"] for r in pve.cluster.resources.get(type="vm") if r["vmid"] == 103)

    def disks() -> set[str]:
        return {v["volid"] for v in pve.nodes("pve1").storage("ceph-vm").content.get(vmid=103)}

    assert maxdisk() == 200 * 1024**3 and disks() == {"ceph-vm:vm-103-disk-0"}
    pve.nodes("pve1").qemu(103).config.put(scsi1="ceph-vm:vm-103-disk-1,size=8G")
    assert disks() == {"ceph-vm:vm-103-disk-0", "ceph-vm:vm-103-disk-1"}
    control(sim, "guests/103", {"set": {"scsi0": "ceph-vm:vm-103-disk-0,size=300G"}})  # in place, as an admin
    assert maxdisk() == 300 * 1024**3
    control(sim, "guests/103", {"delete": ["scsi0"]})
    assert maxdisk() == 0 and disks() == {"ceph-vm:vm-103-disk-1"}


def test_config_digest_conflict(demo_sim: SimServer) -> None:
    pve = api(demo_sim)
    with pytest.raises(ResourceException) as exc:
        pve.nodes("pve1").qemu(103).config.put(description="x", digest="0" * 40)
    assert exc.value.content == "checksum mismatch (file change by other user?)"


def test_vzdump_creates_backup_and_locks_guest(start_sim) -> None:
    sim = start_sim("demo", speed=0.001)  # a task runs until the test finishes it (tasks/finish-all)
    pve = api(sim)
    before = len(pve.nodes("pve3").storage("pbs-main").content.get(vmid=114))
    upid = pve.nodes("pve3").vzdump.post(vmid="114", storage="pbs-main", mode="snapshot")
    assert pve.nodes("pve3").qemu(114).config.get()["lock"] == "backup"
    control(sim, "tasks/finish-all")
    assert _finish(pve, "pve3", upid)["exitstatus"] == "OK"
    after = pve.nodes("pve3").storage("pbs-main").content.get(vmid=114)
    assert len(after) == before + 1 and after[0]["volid"].startswith("pbs-main:backup/vm/114/")
    assert "lock" not in pve.nodes("pve3").qemu(114).config.get()


def test_injected_task_failure_and_faults(start_sim) -> None:
    sim = start_sim("demo")
    pve = api(sim)
    with sim.sim.mutate() as c:
        c.options["task_failures"] = [{"type": "vzdump", "error": "backup storage full"}]
    status = _finish(pve, "pve3", pve.nodes("pve3").vzdump.post(vmid="114", storage="pbs-main"))
    assert status["exitstatus"] == "backup storage full"
    assert pve.nodes("pve3").tasks(status["upid"]).log.get()[-1]["t"] == "TASK ERROR: backup storage full"
    control = requests.Session()
    control.trust_env = False
    control.headers["X-Pvesim-Control"] = sim.control_secret
    r = control.put(
        f"{sim.url}/_sim/faults",
        verify=str(sim.cert_path),
        json={
            "latency": 0.2,
            "errors": [{"pattern": "^/cluster/tasks$", "status": 500, "message": "simulated outage"}],
        },
    )
    assert r.status_code == 200
    t0 = time.monotonic()
    assert pve.version.get()["release"] == "9.1"
    assert time.monotonic() - t0 >= 0.2
    token_id, secret = sim.token("root@pam!pvesim")
    t0 = time.monotonic()  # a body the app cannot read fails in the app (Starlette's 500): still when due
    bad = control.put(
        f"{sim.url}/api2/json/nodes/pve1/qemu/100/config",
        verify=str(sim.cert_path),
        data=b"{not json",
        headers={"content-type": "application/json", "Authorization": f"PVEAPIToken={token_id}={secret}"},
    )
    assert bad.status_code == 500 and time.monotonic() - t0 >= 0.2
    with pytest.raises(ResourceException, match="simulated outage"):
        pve.cluster.tasks.get()
    control.put(f"{sim.url}/_sim/faults", verify=str(sim.cert_path), json={"drop": [{"pattern": "^/nodes$"}]})
    with pytest.raises(requests.exceptions.ChunkedEncodingError):  # the body is cut mid-stream
        pve.nodes.get()
    assert control.post(f"{sim.url}/_sim/nodes/pve1", verify=str(sim.cert_path), json={}).status_code == 400
    assert (
        requests.post(f"{sim.url}/_sim/quorum", verify=str(sim.cert_path), json={"quorate": False}).status_code == 401
    )


def test_generator_builds_a_large_cluster() -> None:
    """The same seed gives the same cluster, and pvesim serves it (its speed is bench/'s, not a test's)."""
    data = generate(nodes=20, guests=2000, seed=1)
    again = generate(nodes=20, guests=2000, seed=1)
    assert data == again
    cluster = pvesim.build_cluster(data)
    assert len(cluster.guests) == 2000 and len(cluster.nodes) == 20
    with SimServer(cluster) as sim:
        pve = api(sim)
        rows = pve.cluster.resources.get()
        assert sum(1 for r in rows if r["type"] in ("qemu", "lxc")) == 2000


def test_sdn_zone_content_lists_vnet_status_and_nothing_for_an_unknown_zone(demo_sim: SimServer) -> None:
    # pve-network src/PVE/API2/Network/SDN/Nodes/Zone.pm index filters Zones.pm status by zone: no error
    pve = api(demo_sim)
    lab = pve.nodes("pve2").sdn.zones("lab").content.get()
    assert {"vnet": "lab20", "status": "error", "statusmsg": "missing vmbr0v20"} in lab
    assert pve.nodes("pve2").sdn.zones("nozone").content.get() == []


def test_sdn_rows_before_pve_9_1_carry_no_zone_type(start_sim) -> None:
    # pve-network 18e6bb7 (1.2.0, PVE 9.1) added zone-type to Zones.pm status; 9.1 shows network rows instead
    rows = [r for r in api(start_sim("demo", version="9.0.10")).cluster.resources.get() if r["type"] == "sdn"]
    assert rows and all("zone-type" not in r for r in rows)
    rows = [r for r in api(start_sim("demo", version="9.1.2")).cluster.resources.get() if r["type"] == "network"]
    assert {r.get("zone-type") for r in rows if r["network"] == "lab"} == {"vlan"}


def test_pve_9_1_lists_localnetwork_for_an_offline_node_too(start_sim) -> None:
    # pve-manager PVE/API2/Cluster.pm resources: the default localnetwork zone for every node of the nodelist
    sim = start_sim("demo", version="9.1.2")
    with sim.sim.mutate() as c:
        c.nodes["pve3"].online = False
    rows = api(sim).cluster.resources.get()
    assert any(r.get("network") == "localnetwork" and r["node"] == "pve3" for r in rows)
    assert not any(r.get("network") == "lab" and r["node"] == "pve3" for r in rows)  # its broadcasts: not modelled


def test_a_vms_agent_reports_the_address_cloud_init_gave_it(start_sim) -> None:
    """cloud-init writes ipconfigN's static address into the guest, so its agent reports it on netN's NIC; a NIC
    without one holds a leased address of its own. What a scenario plants (agent_data) is reported as is."""
    sim = start_sim("maintenance")
    pve = api(sim)
    with sim.sim.mutate() as c:
        c.guests[300].config["agent"] = "1"
        c.guests[101].config["agent"] = "1"
    rows = pve.nodes("p3").qemu(300).agent("network-get-interfaces").get()["result"]
    eth0 = next(r for r in rows if r["hardware-address"] == "bc:24:11:40:00:0c")
    assert [(a["ip-address"], a["prefix"]) for a in eth0["ip-addresses"]] == [("10.1.0.50", 24)]
    leased = pve.nodes("p1").qemu(101).agent("network-get-interfaces").get()["result"]
    assert [a["ip-address"] for r in leased if r["name"] != "lo" for a in r["ip-addresses"]] == ["10.10.0.101"]
    planted = pve.nodes("p2").qemu(110).agent("network-get-interfaces").get()["result"]
    assert [r["name"] for r in planted] == ["lo", "ens18", "docker0"]
