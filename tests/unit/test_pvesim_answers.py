"""pvesim answers as PVE's code produces them (issue 45), in process through pveproxy's pipeline: the logs with
dump_logfile's numbering, nextid and join information, guest firewall rules and agent commands, replication
with replicas on the target, disks with their use, Ceph daemons per node, the error forms of pveproxy."""

from __future__ import annotations

from typing import Any

import pytest

import pvesim
from pvesim.app import Simulator


@pytest.fixture(scope="module")
def complete() -> Simulator:
    return Simulator(pvesim.build_cluster(pvesim.load_scenario("complete"), speed=10_000.0))


@pytest.fixture(scope="module")
def demo() -> Simulator:
    return Simulator(pvesim.build_cluster(pvesim.load_scenario("demo"), speed=10_000.0))


def data(sim: Simulator, path: str, **params: Any) -> Any:
    answer = sim.request("GET", path, {k: str(v) for k, v in params.items()})
    assert answer.status == 200, (answer.status, answer.reason)
    assert answer.body is not None
    return answer.body["data"]


def body(sim: Simulator, path: str, **params: Any) -> dict[str, Any]:
    answer = sim.request("GET", path, {k: str(v) for k, v in params.items()})
    assert answer.body is not None
    return answer.body


# ---------------------------------------------------------------- logs (pve-common Tools.pm dump_logfile)


def test_syslog_numbers_lines_from_start_and_counts_all(complete: Simulator) -> None:
    whole = body(complete, "/nodes/px1/syslog")
    first = body(complete, "/nodes/px1/syslog", start=2, limit=3)
    assert first["total"] == whole["total"] > 3
    assert [r["n"] for r in first["data"]] == [3, 4, 5]
    assert [r["t"] for r in first["data"]] == [r["t"] for r in whole["data"][2:5]]


def test_a_log_read_past_its_end_is_empty_but_keeps_the_total(complete: Simulator) -> None:
    past = body(complete, "/nodes/px1/syslog", start=100_000, limit=5)
    assert past["data"] == [] and past["total"] == body(complete, "/nodes/px1/syslog")["total"]


def test_the_firewall_log_of_a_guest_holds_only_its_lines(complete: Simulator) -> None:
    node = data(complete, "/nodes/px1/firewall/log")
    guest = data(complete, "/nodes/px1/qemu/200/firewall/log")
    assert guest and all(r["t"].startswith("200 ") for r in guest)
    assert len(node) > len(guest)
    assert [r["n"] for r in guest] == list(range(1, len(guest) + 1))


# ---------------------------------------------------------------- nextid, join


def test_nextid_is_a_string_above_the_taken_ids_and_checks_a_wanted_one(complete: Simulator) -> None:
    nextid = data(complete, "/cluster/nextid")
    assert isinstance(nextid, str) and int(nextid) not in complete.cluster.guests
    assert data(complete, "/cluster/nextid", vmid=1500) == "1500"
    taken = body(complete, "/cluster/nextid", vmid=200)
    assert taken["errors"] == {"vmid": "VM 200 already exists"}
    low = complete.request("GET", "/cluster/nextid", {"vmid": "50"})
    assert low.status == 400 and low.body is not None and "minimum value of 100" in low.body["errors"]["vmid"]


def test_join_information_lists_every_node_with_its_fingerprint(complete: Simulator) -> None:
    join = data(complete, "/cluster/config/join")
    assert [n["name"] for n in join["nodelist"]] == ["px1", "px2", "px3"]
    assert all(len(n["pve_fp"].split(":")) == 32 for n in join["nodelist"])


# ---------------------------------------------------------------- firewall, agent


def test_guest_firewall_rules_carry_position_digest_and_ip_version(complete: Simulator) -> None:
    rules = data(complete, "/nodes/px1/qemu/200/firewall/rules")
    assert [r["pos"] for r in rules] == list(range(len(rules)))
    assert len({r["digest"] for r in rules}) == 1
    assert rules[0]["ipversion"] == 4  # its source and dest are IPv4 (Rules.pm verify_rule)
    ipv6 = data(complete, "/nodes/px1/firewall/rules/2")
    assert ipv6["proto"] == "ipv6-icmp" and ipv6["ipversion"] == 6


def test_agent_answers_wrap_in_result_and_fail_without_an_agent(complete: Simulator) -> None:
    info = data(complete, "/nodes/px1/qemu/200/agent/info")
    assert set(info) == {"result"} and info["result"]["supported_commands"]
    off = complete.request("GET", "/nodes/px1/qemu/203/agent/info")
    assert (off.status, off.reason) == (500, "No QEMU guest agent configured")
    ping = complete.request("POST", "/nodes/px1/qemu/200/agent/ping")
    assert ping.status == 200 and ping.body == {"data": {"result": {}}}


def test_exec_status_reports_what_the_agent_started(complete: Simulator) -> None:
    done = data(complete, "/nodes/px1/qemu/200/agent/exec-status", pid=4711)
    assert done == {"exited": 1, "exitcode": 0, "out-data": "up 12 days\n", "err-data": "", "out-truncated": 0,
                    "err-truncated": 0}  # fmt: skip
    unknown = complete.request("GET", "/nodes/px1/qemu/200/agent/exec-status", {"pid": "99"})
    assert unknown.reason == "Agent error: Invalid parameter 'pid' value 99 not found"


# ---------------------------------------------------------------- storage, replication, disks


def test_storage_config_entry_is_served(complete: Simulator) -> None:
    entry = data(complete, "/storage/ceph-vm")
    assert entry["type"] == "rbd" and entry["content"] == "images,rootdir" and entry["digest"]


def test_replicas_live_on_the_target_and_the_job_reports_its_state(complete: Simulator) -> None:
    target = [r["volid"] for r in data(complete, "/nodes/px3/storage/local-zfs/content") if r.get("vmid") == 201]
    assert target == ["local-zfs:vm-201-disk-0", "local-zfs:vm-201-disk-1"]
    (job,) = [j for j in data(complete, "/nodes/px2/replication") if j["id"] == "201-0"]
    assert job["fail_count"] == 0 and job["last_sync"] == job["last_try"] and job["next_sync"] > job["last_sync"]
    log = data(complete, "/nodes/px2/replication/201-0/log")
    assert log[0]["t"].endswith("201-0: start replication job")


def test_a_volume_id_with_a_slash_reaches_the_content_item(complete: Simulator) -> None:
    """Storage/Status.pm registers Content with fragmentDelimiter '': the rest of the path is the volume."""
    item = data(complete, "/nodes/px1/storage/local/content/local:iso/debian-13.1.0-amd64-netinst.iso")
    assert item["format"] == "iso" and item["path"].endswith("/template/iso/debian-13.1.0-amd64-netinst.iso")


def test_a_linked_clone_names_its_base_and_an_encrypted_backup_its_key(complete: Simulator) -> None:
    disks = {r["volid"]: r for r in data(complete, "/nodes/px1/storage/ceph-vm/content")}
    assert disks["ceph-vm:base-209-disk-0/vm-203-disk-0"]["parent"] == "base-209-disk-0@__base__"
    backups = data(complete, "/nodes/px1/storage/pbs/content")
    assert [b["encrypted"] for b in backups if b["vmid"] == 201] == [
        "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99"
    ]


def test_disks_show_what_they_hold(complete: Simulator) -> None:
    used = {d["devpath"]: (d.get("used"), d["osdid"]) for d in data(complete, "/nodes/px1/disks/list")}
    assert used["/dev/sda"] == ("BIOS boot", -1)
    assert used["/dev/sdc"] == ("ext4", -1)
    assert ("LVM", 0) in used.values()  # osd.0 on a disk of its own
    (unit,) = data(complete, "/nodes/px1/disks/directory")
    assert unit["path"] == "/mnt/pve/bulk" and unit["type"] == "ext4"


# ---------------------------------------------------------------- guests, Ceph


def test_running_machine_follows_the_guest_not_the_newest_qemu(complete: Simulator) -> None:
    pinned = data(complete, "/nodes/px1/qemu/200/status/current")
    older = data(complete, "/nodes/px2/qemu/201/status/current")
    assert pinned["running-machine"] == "pc-q35-10.0+pve1"  # the config pins the machine and its revision
    assert (older["running-qemu"], older["running-machine"]) == ("9.2.0", "pc-i440fx-9.2+pve0")


def test_a_live_snapshot_records_the_state_volume_machine_and_cpu(complete: Simulator) -> None:
    snap = data(complete, "/nodes/px1/qemu/200/snapshot/pre_upgrade/config")
    assert snap["vmstate"] == "ceph-vm:vm-200-state-pre_upgrade"
    assert snap["runningmachine"] == "pc-q35-10.0+pve1"
    assert snap["runningcpu"].startswith("x86-64-v3,enforce,")
    assert snap["running-nets-host-mtu"] == "net0=0,net1=0"


def test_cloudinit_pending_shows_what_changed_since_the_drive_was_made(complete: Simulator) -> None:
    rows = {r["key"]: r for r in data(complete, "/nodes/px1/qemu/200/cloudinit")}
    assert rows["searchdomain"] == {"key": "searchdomain", "pending": "example.com"}
    assert rows["ciuser"] == {"key": "ciuser", "value": "admin", "pending": "deploy"}
    assert rows["cipassword"]["value"] == "**********"


def test_ceph_daemons_have_their_own_nodes_addresses(complete: Simulator) -> None:
    mons = data(complete, "/nodes/px1/ceph/mon")
    mgrs = data(complete, "/nodes/px1/ceph/mgr")
    assert len({m["addr"] for m in mons}) == len(mons) == 3
    assert len({m["addr"] for m in mgrs}) == 3 and all(m["ceph_version_short"] == "19.2.3" for m in mgrs)


def test_pool_status_flags_are_json_booleans_and_unset_options_null(complete: Simulator) -> None:
    pool = data(complete, "/nodes/px1/ceph/pool/.mgr/status", verbose=1)
    assert pool["hashpspool"] is True and pool["nodelete"] is False
    assert pool["pg_num_min"] is None and pool["application_list"] == ["mgr"]
    assert pool["autoscale_status"]["pg_num_final"] == pool["pg_num"]


# ---------------------------------------------------------------- backup defaults and jobs


def test_vzdump_defaults_parse_property_strings_and_use_the_storages_dump_dir(complete: Simulator) -> None:
    d = data(complete, "/nodes/px1/vzdump/defaults", storage="local")
    assert d["performance"] == {"max-workers": 8, "pbs-entries-max": 1048576}  # merged with the defaults
    assert d["fleecing"] == {"enabled": 1, "storage": "local-zfs"}
    assert d["dumpdir"] == "/var/lib/vz/dump" and d["exclude-path"] == "/tmp/?*,/var/tmp/?*"


def test_backup_jobs_decode_property_strings_and_compute_the_next_weekday_run(complete: Simulator) -> None:
    import datetime as dt

    (job,) = [j for j in data(complete, "/cluster/backup") if j["id"] == "backup-prod"]
    assert job["fleecing"] == {"enabled": 1, "storage": "local-zfs"}
    assert job["performance"] == {"max-workers": 16, "pbs-entries-max": 1048576}
    run = dt.datetime.fromtimestamp(job["next-run"], dt.UTC)
    assert run.weekday() < 5 and (run.hour, run.minute) == (21, 0)
    assert "next-run" not in data(complete, "/cluster/backup/backup-prod")  # read_job does not compute it


# ---------------------------------------------------------------- pveproxy's error forms


def test_errors_take_pveproxys_forms(demo: Simulator) -> None:
    from pvesim import pipeline

    no_token = pipeline.run(demo, "GET", "/version", {}, None, "json")
    assert (no_token.status, no_token.reason, no_token.body) == (401, "No ticket", None)
    bad = pipeline.run(demo, "GET", "/version", {}, "PVEAPIToken=root@pam!x=nope", "json")
    assert (bad.status, bad.reason, bad.body) == (401, "Authentication failed!", None)
    missing = demo.request("GET", "/nodes/pve1/no-such-thing")
    assert missing.status == 501 and missing.body == {
        "data": None,
        "message": "Method 'GET /nodes/pve1/no-such-thing' not implemented",  # HTTPServer.pm: no newline
    }
    dup = demo.request("GET", "/nodes/pve1/status", {"node": "pve2"})
    assert (
        dup.status == 400
        and dup.body is not None
        and dup.body["errors"] == {"node": "duplicate parameter (already defined in URI) with conflicting values!"}
    )
    root_only = demo.request("GET", "/cluster/backup-info")
    assert (root_only.status, root_only.reason) == (403, "Permission check failed (user != root@pam)")


def test_proxy_failures_have_a_reason_and_no_body() -> None:
    """AnyEvent::HTTP's pseudo-statuses as pveproxy passes them on: 595 for a node it cannot reach (with $!),
    596 and the others for what a fault rule plants; no body."""
    from pvesim.faults import ErrorRule

    data = pvesim.load_scenario("demo")
    sim = Simulator(pvesim.build_cluster(data, speed=10_000.0))
    offline = next(iter(sim.cluster.nodes.values()))
    offline.online = False
    down = sim.request("GET", f"/nodes/{offline.name}/status")
    assert (down.status, down.reason, down.body) == (595, "No route to host", None)
    sim.faults.errors.append(ErrorRule(pattern="^/version$", status=596, message="Connection reset by peer"))
    broken = sim.request("GET", "/version")
    assert (broken.status, broken.reason, broken.body) == (596, "Connection reset by peer", None)
