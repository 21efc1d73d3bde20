"""More of PVE's Ceph API (pve-manager PVE/API2/Ceph.pm crush/log/rules, Ceph/Cfg.pm db/value, Ceph/FS.pm,
Ceph/OSD.pm osddetails/osdvolume, Ceph/Pool.pm getpool), from the same Ceph model (pvesim/ceph.py)."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any
from zoneinfo import ZoneInfo

from pvesim import disks, logs
from pvesim.api.ceph import _ceph, _nonce, daemon_addr
from pvesim.api.registry import ApiError, Call, Result, route
from pvesim.api.system import ceph_conf_sections
from pvesim.ceph import Ceph, release_name


@route("GET", "/nodes/{node}/ceph/cfg/db")
def config_db(call: Call) -> list[dict[str, Any]]:
    """Ceph/Cfg.pm db: ``ceph config dump``, can_update_at_runtime as 0/1."""
    return [
        {**e, "level": "advanced", "mask": "", "can_update_at_runtime": 1 if e["name"].startswith("mon_") else 0}
        for e in _ceph(call).configdb
    ]


@route("GET", "/nodes/{node}/ceph/cfg/value")
def config_value(call: Call) -> dict[str, dict[str, str]]:
    """Ceph/Cfg.pm value: the requested <section>:<key> pairs from the config db, then ceph.conf over them
    ('-' and '_' alike, answered with '-')."""
    ceph = _ceph(call)

    def norm(text: str) -> str:
        return text.replace("_", "-")

    wanted: dict[str, set[str]] = {}
    for pair in str(call.params["config-keys"]).replace(",", ";").split(";"):
        section, _, key = pair.strip().partition(":")
        if section:
            wanted.setdefault(norm(section), set()).add(norm(key))
    out: dict[str, dict[str, str]] = {}
    sources = [(e["section"], {e["name"]: e["value"]}) for e in ceph.configdb]
    sources += list(ceph_conf_sections(call.cluster).items())
    for section, values in sources:
        for key, value in values.items():
            if norm(key) in wanted.get(norm(section), set()):
                out.setdefault(norm(section), {})[norm(key)] = str(value)
    return out


@route("GET", "/nodes/{node}/ceph/crush")
def crush(call: Call) -> str:
    """Ceph.pm crush: ``crushtool -d`` of the cluster's map: the devices, types, one host bucket per node
    with OSDs, the default root and the replicated rule."""
    ceph = _ceph(call)
    lines = ["# begin crush map", "tunable choose_local_tries 0", "tunable choose_local_fallback_tries 0",
             "tunable choose_total_tries 50", "tunable chooseleaf_descend_once 1", "tunable chooseleaf_vary_r 1",
             "tunable chooseleaf_stable 1", "tunable straw_calc_version 1", "tunable allowed_bucket_algs 54", "",
             "# devices"]  # fmt: skip
    lines += [
        f"device {o.id} osd.{o.id} class {o.device_class}" for o in sorted(ceph.osds.values(), key=lambda o: o.id)
    ]
    lines += ["", "# types"]
    kinds = ("osd", "host", "chassis", "rack", "row", "pdu", "pod", "room", "datacenter", "zone", "region", "root")
    lines += [f"type {i} {k}" for i, k in enumerate(kinds)]
    lines += ["", "# buckets"]
    for i, host in enumerate(ceph.hosts, start=2):
        osds = sorted((o for o in ceph.osds.values() if o.host == host), key=lambda o: o.id)
        weight = sum(o.total for o in osds) / 1024**4
        lines += [f"host {host} {{", f"\tid -{i}\t\t# do not change unnecessarily", f"\t# weight {weight:.5f}",
                  "\talg straw2", "\thash 0\t# rjenkins1"]  # fmt: skip
        lines += [f"\titem osd.{o.id} weight {o.total / 1024**4:.5f}" for o in osds]
        lines.append("}")
    total = sum(o.total for o in ceph.osds.values()) / 1024**4
    lines += ["root default {", "\tid -1\t\t# do not change unnecessarily", f"\t# weight {total:.5f}",
              "\talg straw2", "\thash 0\t# rjenkins1"]  # fmt: skip
    for host in ceph.hosts:
        weight = sum(o.total for o in ceph.osds.values() if o.host == host) / 1024**4
        lines.append(f"\titem {host} weight {weight:.5f}")
    lines += ["}", "", "# rules", "rule replicated_rule {", "\tid 0", "\ttype replicated",
              "\tstep take default", "\tstep chooseleaf firstn 0 type host", "\tstep emit", "}", "",
              "# end crush map", ""]  # fmt: skip
    return "\n".join(lines)


@route("GET", "/nodes/{node}/ceph/rules")
def rules(call: Call) -> list[dict[str, str]]:
    """Ceph.pm rules: ``osd crush rule ls``."""
    _ceph(call)
    return [{"name": "replicated_rule"}]


@route("GET", "/nodes/{node}/ceph/fs")
def fs(call: Call) -> list[dict[str, Any]]:
    """Ceph/FS.pm index (Tools.pm ls_fs): the CephFS when metadata servers exist (``pveceph fs create`` names
    it cephfs with the pools cephfs_metadata and cephfs_data)."""
    ceph = _ceph(call)
    if not ceph.mds:
        return []
    return [{"name": "cephfs", "metadata_pool": "cephfs_metadata", "data_pool": "cephfs_data"}]


def _ceph_log_lines(call: Call, ceph: Ceph) -> list[str]:
    """/var/log/ceph/ceph.log: the monitors' cluster log, a pgmap line every few minutes and each health
    check's 'Health check failed' line."""
    c = call.cluster
    zone = ZoneInfo(c.nodes[call.params["node"]].health.timezone)
    now = int(c.clock.now())
    leader = sorted(ceph.mons)[0] if ceph.mons else "mon"
    lines = []
    pgs = sum(p.pg_num for p in ceph.pools.values())
    used, total = ceph.raw_used() / 1024**4, ceph.raw_total() / 1024**4
    for i, t in enumerate(range(now - 3600, now, 120)):
        stamp = dt.datetime.fromtimestamp(t, zone).isoformat(timespec="microseconds")
        lines.append(
            f"{stamp} mgr.{leader} (mgr.4100) {1200 + i} : cluster [DBG] pgmap v{52000 + i}: {pgs} pgs: {pgs} "
            f"active+clean; {used:.1f} TiB used, {max(total - used, 0):.1f} TiB / {total:.1f} TiB avail"
        )
    for i, (name, check) in enumerate(sorted(ceph.health_checks().items())):
        stamp = dt.datetime.fromtimestamp(now - 1800 + i, zone).isoformat(timespec="microseconds")
        level = "ERR" if check["severity"] == "HEALTH_ERR" else "WRN"
        lines.append(
            f"{stamp} mon.{leader} (mon.0) {900 + i} : cluster [{level}] Health check failed: "
            f"{check['summary']['message']} ({name})"
        )
    return sorted(lines)


@route("GET", "/nodes/{node}/ceph/log")
def ceph_log(call: Call) -> Result:
    """Ceph.pm log: dump_logfile of /var/log/ceph/ceph.log."""
    ceph = _ceph(call)
    total, rows = logs.dump_logfile(
        _ceph_log_lines(call, ceph), int(call.params.get("start") or 0), int(call.params.get("limit", 50))
    )
    return Result(rows, total=total)


def _osd(call: Call) -> Any:
    """OSD.pm osddetails: the OSD must be this node's ('OSD <id> does not exists on host <node>')."""
    ceph = _ceph(call)
    osd = ceph.osds.get(int(call.params["osdid"]))
    node = call.params["node"]
    if osd is None:
        raise ApiError(500, f"OSD '{call.params['osdid']}' does not exists on host '{node}'")
    if osd.host != node:
        raise ApiError(500, f"OSD '{osd.id}' does not exists on host '{node}'")
    return osd


@route("GET", "/nodes/{node}/ceph/osd/{osdid}/metadata")
def osd_metadata(call: Call) -> dict[str, Any]:
    """OSD.pm osddetails: ``osd metadata`` of the OSD (its addresses, store, version), the PSS of its process
    and the BlueStore block device."""
    ceph = _ceph(call)
    osd = _osd(call)
    version = osd.version or ceph.version
    nonce = _nonce(f"osd.{osd.id}")

    def addr(port: int) -> str:  # each OSD its own ports on its node
        return daemon_addr(call, osd.host, port + 8 * osd.id, nonce)

    info: dict[str, Any] = {
        "hostname": osd.host,
        "id": osd.id,
        "mem_usage": 1_900_000_000 + osd.id * 37_000_000 if osd.up else 0,
        "osd_data": f"/var/lib/ceph/osd/ceph-{osd.id}",
        "osd_objectstore": "bluestore",
        "version": f"{version} ({release_name(version)})",
        "front_addr": f"[v2:{addr(6802)},v1:{addr(6803)}]",
        "back_addr": f"[v2:{addr(6804)},v1:{addr(6805)}]",
        "hb_front_addr": f"[v2:{addr(6808)}]",
        "hb_back_addr": f"[v2:{addr(6809)}]",
    }
    if osd.up:
        info["pid"] = 3000 + osd.id
    disk = next((d for d in disks.node_disks(call.cluster, call.cluster.nodes[osd.host]) if d.osdid == osd.id), None)
    physical = str(disk.disk["devpath"]).rsplit("/", 1)[-1] if disk else "sdb"
    device = {
        "device": "block",
        "dev_node": f"/dev/dm-{osd.id + 1}",
        "devices": physical,
        "size": osd.total,
        "support_discard": 1 if osd.device_class != "hdd" else 0,
        "type": osd.device_class,
    }
    return {"osd": info, "devices": [device]}


@route("GET", "/nodes/{node}/ceph/osd/{osdid}/lv-info")
def osd_lv_info(call: Call) -> dict[str, Any]:
    """OSD.pm osdvolume: ``ceph-volume lvm list``'s block LV of the OSD (no separate db or wal here)."""
    osd = _osd(call)
    kind = call.params.get("type", "block")
    if kind != "block":
        raise ApiError(500, f"volume type '{kind}' not found for OSD {osd.id}")
    uid = hashlib.md5(f"{call.cluster.name}/osd.{osd.id}".encode(), usedforsecurity=False).hexdigest()
    vg = f"ceph-{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"
    lv = f"osd-block-{uid[::-1][:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"
    return {
        "lv_name": lv,
        "lv_path": f"/dev/{vg}/{lv}",
        "lv_uuid": uid[:6] + "-" + uid[6:10] + "-" + uid[10:14],
        "vg_name": vg,
        "lv_size": osd.total,
        "creation_time": "2026-10-01 12:00:00 +0200",
    }


@route("GET", "/nodes/{node}/ceph/pool/{name}/status")
def pool_status(call: Call) -> dict[str, Any]:
    """Ceph/Pool.pm getpool: ``osd pool get <pool> all`` (flags as booleans), and with ``verbose`` the
    autoscaler's view, the pool's df statistics and its applications."""
    ceph = _ceph(call)
    pool = ceph.pools.get(call.params["name"])
    if pool is None:
        raise ApiError(500, f"unrecognized pool '{call.params['name']}'")
    data: dict[str, Any] = {
        "id": pool.id,
        "name": pool.name,
        "size": pool.size,
        "min_size": pool.min_size,
        "pg_num": pool.pg_num,
        "pgp_num": pool.pg_num,
        "crush_rule": "replicated_rule",
        "pg_autoscale_mode": pool.autoscale_mode,
        "noscrub": False,  # JSON::true / JSON::false
        "nodeep-scrub": False,
        "nodelete": False,
        "nopgchange": False,
        "nosizechange": False,
        "write_fadvise_dontneed": False,
        "hashpspool": True,
        "use_gmt_hitset": True,
        "fast_read": False,
        "pg_num_min": pool.pg_num_min,  # undefined (null) unless set
        "target_size": pool.target_size,
        "target_size_ratio": pool.target_size_ratio,
    }
    if call.flag("verbose"):
        data["autoscale_status"] = ceph.autoscale_status(pool)
        data["statistics"] = ceph.pool_stats(pool)
        data["application_list"] = list(ceph.application_metadata(pool))
    return data
