"""PVE's Ceph API (pve-manager PVE/API2/Cluster/Ceph.pm, PVE/API2/Ceph.pm, Ceph/OSD.pm, Ceph/Pool.pm, Ceph/MON.pm)."""

from __future__ import annotations

from typing import Any

from pvesim.api.registry import ApiError, Call, b, route
from pvesim.ceph import FLAG_DESCRIPTIONS, FLAGS, Ceph, release_name


def _ceph(call: Call) -> Ceph:
    """PVE::Ceph::Tools::check_ceph_inited on the node that runs the call: a /nodes/{node}/ceph call is proxied
    to its node, a /cluster/ceph call (no proxyto) runs on the node answering the API. Without the Ceph
    packages there (check_ceph_installed) every Ceph call dies with this."""
    ceph = call.cluster.ceph
    where = call.params.get("node") or (ceph.api_node if ceph else "")
    if ceph is None or where not in ceph.installed:
        raise ApiError(500, "binary not installed: /usr/bin/ceph-mon")
    if not ceph.inited:
        raise ApiError(
            500, "pveceph configuration not initialized - missing '/etc/pve/ceph.conf', missing '/etc/pve/ceph'"
        )
    return ceph


def daemon_addr(call: Call, host: str, port: int, nonce: int) -> str:
    """A daemon's address as Ceph prints it: its node's address, the daemon's port, its nonce (the monitors'
    nonce is 0); each daemon its own, as on a real cluster."""
    node = call.cluster.nodes.get(host)
    return f"{node.ip if node else host}:{port}/{nonce}"


def _nonce(name: str) -> int:
    return 1000 + sum(ord(ch) for ch in name) * 7


def _version_string(version: str) -> str:
    return f"ceph version {version} (pvesim) {release_name(version)} (stable)"


@route("GET", "/nodes/{node}/ceph/status")
def node_status(call: Call) -> dict[str, Any]:
    """PVE/API2/Ceph.pm status (proxyto node): the same ceph_cluster_status, asked on that node."""
    return _cluster_status(call, _ceph(call))


@route("GET", "/cluster/ceph/status")
def status(call: Call) -> dict[str, Any]:
    """PVE/API2/Cluster/Ceph.pm status (no proxyto): ceph_cluster_status on the node answering the API."""
    return _cluster_status(call, _ceph(call))


def _cluster_status(call: Call, ceph: Ceph) -> dict[str, Any]:
    """PVE::Ceph::Tools::ceph_cluster_status: ``ceph status`` as JSON."""
    quorum = ceph.quorum()
    if not quorum:
        raise ApiError(500, "got timeout")  # librados cannot reach a quorate monitor
    osds = list(ceph.osds.values())
    total, used = ceph.raw_total(), ceph.raw_used()
    degraded = ceph.health_checks().get("PG_DEGRADED")
    pgs = sum(p.pg_num for p in ceph.pools.values())
    bad = int(degraded["summary"]["count"]) if degraded else 0
    by_state = [{"state_name": "active+clean", "count": pgs - bad}] if pgs - bad else []
    if bad:
        by_state.append({"state_name": "active+undersized+degraded", "count": bad})
    return {
        "fsid": ceph.fsid,
        "health": {"status": ceph.health_status(), "checks": ceph.health_checks(), "mutes": []},
        "election_epoch": 42,
        "quorum": [ceph.rank(m.name) for m in quorum],
        "quorum_names": [m.name for m in quorum],
        "quorum_age": 86400,
        "monmap": _mon_dump(call, ceph),  # Tools.pm ceph_cluster_status: octopus+ status lacks monmap.mons, PVE
        "mgrmap": _mgr_dump(call, ceph),  # re-adds `mon dump` and `mgr dump`
        "fsmap": _fsmap(ceph),
        "servicemap": _servicemap(call, ceph),
        "progress_events": {},
        "osdmap": {
            "epoch": 512,
            "num_osds": len(osds),
            "num_up_osds": sum(o.up for o in osds),
            "num_in_osds": sum(o.in_ for o in osds),
            "num_remapped_pgs": 0,
        },
        "pgmap": {
            "pgs_by_state": by_state,
            "num_pgs": pgs,
            "num_pools": len(ceph.pools),
            "data_bytes": sum(p.stored for p in ceph.pools.values()),
            "bytes_used": used,
            "bytes_avail": max(total - used, 0),
            "bytes_total": total,
        },
    }


def _mon_dump(call: Call, ceph: Ceph) -> dict[str, Any]:
    """``ceph mon dump``: the monmap's members with their rank, and the quorum's ranks."""
    mons = [
        {
            "rank": ceph.rank(m.name),
            "name": m.name,
            "addr": daemon_addr(call, m.host, 6789, 0),
            "public_addr": daemon_addr(call, m.host, 6789, 0),
            "priority": 0,
            "weight": 0,
        }
        for m in sorted(ceph.mons.values(), key=lambda m: ceph.rank(m.name))
    ]
    return {
        "epoch": 3,
        "fsid": ceph.fsid,
        "min_mon_release_name": release_name(ceph.version),
        "mons": mons,
        "quorum": sorted(ceph.rank(m.name) for m in ceph.quorum()),
    }


def _mgr_dump(call: Call, ceph: Ceph) -> dict[str, Any]:
    """``ceph mgr dump``: the active manager's name and the standbys (www/manager6/ceph/Services.js reads them)."""
    active = ceph.active_mgr()
    return {
        "epoch": 20,
        "active_gid": 4100 if active else 0,
        "active_name": active.name if active else "",
        "active_addr": daemon_addr(call, active.host, 6801, _nonce(active.name)) if active else "-",
        "available": active is not None,
        "standbys": [{"gid": 4200 + i, "name": m.name} for i, m in enumerate(ceph.standby_mgrs())],
        "modules": ["iostat", "nfs", "restful"],
    }


def _fsmap(ceph: Ceph) -> dict[str, Any]:
    """``ceph status``'s fsmap: the file system's ranks (the active MDS) and the standbys' count."""
    active = [d for d in ceph.mds if d.state == "active"]
    by_rank = [
        {"filesystem_id": 1, "rank": 0, "name": d.name, "status": "up:active", "gid": 5000 + i}
        for i, d in enumerate(active)
    ]
    out: dict[str, Any] = {"epoch": 12 if ceph.mds else 1, "btime": "2026-10-01T12:00:00:000000+0000"}
    if ceph.mds:
        out.update(id=1, up=len(active), **{"in": len(active)}, max=1)
    out.update(by_rank=by_rank, **{"up:standby": sum(d.state == "standby" for d in ceph.mds)})
    return out


def _servicemap(call: Call, ceph: Ceph) -> dict[str, Any]:
    """``ceph status``'s servicemap: the services registered besides the core daemons (none on a PVE cluster
    without RGW), and the map's epoch."""
    return {"epoch": 3, "modified": "2026-10-01T12:00:00.000000+0000", "services": {}}


@route("GET", "/cluster/ceph/flags")
def flags(call: Call) -> list[dict[str, Any]]:
    ceph = _ceph(call)
    return [{"name": f, "description": FLAG_DESCRIPTIONS[f], "value": b(f in ceph.flags)} for f in FLAGS]


@route("GET", "/cluster/ceph/flags/{flag}")
def flag(call: Call) -> int:
    return b(call.params["flag"] in _ceph(call).flags)


@route("PUT", "/cluster/ceph/flags/{flag}")
def set_flag(call: Call) -> None:
    """``ceph osd set|unset <flag>``; setting a flag that is already set changes nothing."""
    ceph = _ceph(call)
    if call.flag("value"):
        ceph.flags.add(call.params["flag"])
    else:
        ceph.flags.discard(call.params["flag"])


@route("GET", "/cluster/ceph/metadata")
def metadata(call: Call) -> dict[str, Any]:
    """Cluster/Ceph.pm metadata: the nodes' installed versions first (scope=versions needs no Ceph here)."""
    cluster = call.cluster.ceph
    nodes = {
        n: {"version": {"str": v, "parts": v.split(".")}, "buildcommit": "0"}
        for n in call.cluster.nodes
        if cluster is not None and n in cluster.installed  # pvestatd broadcasts only where Ceph is inited
        for v in [cluster.installed_versions.get(n, cluster.version)]
    }
    if call.params.get("scope", "all") == "versions":
        return {"node": nodes} if nodes else {}
    ceph = _ceph(call)

    def daemon(name: str, host: str, version: str) -> dict[str, Any]:
        return {
            "name": name,
            "hostname": host,
            "ceph_release": release_name(version),
            "ceph_version": _version_string(version),
            "ceph_version_short": version,
            "mem_total_kb": 4_000_000,
            "mem_swap_kb": 0,
        }

    # Cluster/Ceph.pm metadata: mon, mgr and mds keyed "<name>@<host>"
    mons = {
        f"{m.name}@{m.host}": dict(
            daemon(m.name, m.host, m.version),
            addrs=f"[v2:{daemon_addr(call, m.host, 3300, 0)},v1:{daemon_addr(call, m.host, 6789, 0)}]",
        )
        for m in ceph.mons.values()
    }
    mgrs = {
        f"{m.name}@{m.host}": dict(daemon(m.name, m.host, m.version), addr=daemon_addr(call, m.host, 0, _nonce(m.name)))
        for m in ceph.mgrs
    }
    mds = {
        f"{d.name}@{d.host}": dict(
            daemon(d.name, d.host, d.version), addr=daemon_addr(call, d.host, 6800, _nonce(d.name))
        )
        for d in ceph.mds
        if d.state != "stopped"
    }
    osds = [
        dict(
            daemon(str(o.id), o.host, o.version),
            id=o.id,
            osd_objectstore="bluestore",
            osd_data=f"/var/lib/ceph/osd/ceph-{o.id}",
        )
        for o in ceph.osds.values()  # `osd metadata`: every existing OSD, down ones too (with their last version)
    ]
    out: dict[str, Any] = {"mon": mons, "mgr": mgrs, "osd": osds, "mds": mds}
    if nodes:
        out["node"] = nodes
    return out


@route("GET", "/nodes/{node}/ceph/osd")
def osd_tree(call: Call) -> dict[str, Any]:
    """Ceph/OSD.pm index: the whole CRUSH tree (every host), whichever node answers."""
    ceph = _ceph(call)
    hosts = []
    for i, host in enumerate(ceph.hosts, start=2):
        children = []
        for o in sorted(ceph.osds.values(), key=lambda o: o.id):
            if o.host != host:
                continue
            children.append(
                {
                    "id": o.id,
                    "name": f"osd.{o.id}",
                    "type": "osd",
                    "host": host,
                    "status": "up" if o.up else "down",
                    "in": b(o.in_),
                    "crush_weight": round(o.total / 1024**4, 5),
                    "reweight": 1 if o.in_ else 0,
                    "device_class": o.device_class,
                    "total_space": o.total,
                    "bytes_used": o.used,
                    "percent_used": o.used * 100 / o.total if o.total else 0,
                    "commit_latency_ms": o.latency_ms,
                    "apply_latency_ms": o.latency_ms,
                    "osdtype": "bluestore",
                    "ceph_version": _version_string(o.version),
                    "ceph_version_short": o.version,
                    "leaf": 1,
                }
            )
        hosts.append({"id": -i, "name": host, "type": "host", "children": children, "leaf": 0, "version": ceph.version})
    root = {"id": -1, "name": "default", "type": "root", "children": hosts, "leaf": 0}
    out: dict[str, Any] = {"root": {"leaf": 0, "children": [root]}}
    # osd dump's flags: the operator's (noout, ...) before those every OSD map of a current cluster carries
    out["flags"] = ",".join(
        [*sorted(ceph.flags), "sortbitwise", "recovery_deletes", "purged_snapdirs", "pglog_hardlimit"]
    )
    return out


@route("GET", "/nodes/{node}/ceph/pool")
def pools(call: Call) -> list[dict[str, Any]]:
    ceph = _ceph(call)
    rows = []
    for p in ceph.pools.values():
        row: dict[str, Any] = {
            "pool": p.id,
            "pool_name": p.name,
            "type": "replicated",
            "size": p.size,
            "min_size": p.min_size,
            "pg_num": p.pg_num,
            "pg_autoscale_mode": p.autoscale_mode,
            "crush_rule": 0,
            "crush_rule_name": "replicated_rule",
            "bytes_used": p.stored * p.size,
            "percent_used": ceph.pool_percent(p),
            "application_metadata": ceph.application_metadata(p),
        }
        # Pool.pm lspools: with the autoscaler (always on since Octopus) its status, and the options Ceph nests
        # under ``options`` (undefined, so null, unless set)
        status = ceph.autoscale_status(p)
        row["autoscale_status"] = status
        row["pg_num_final"] = status["pg_num_final"]
        row["pg_num_min"] = p.pg_num_min
        row["target_size"] = p.target_size
        row["target_size_ratio"] = p.target_size_ratio
        rows.append(row)
    return rows


@route("GET", "/nodes/{node}/ceph/mon")
def mons(call: Call) -> list[dict[str, Any]]:
    """Ceph/MON.pm listmon: quorum members are 'running'; without a quorum the state is unknown."""
    ceph = _ceph(call)
    quorum = {m.name for m in ceph.quorum()}
    rows = []
    for m in sorted(ceph.mons.values(), key=lambda m: m.name):
        row: dict[str, Any] = {
            "name": m.name,
            "host": m.host,  # the node (Services.pm get_services_info); the schema's "boolean" is a lie
            "addr": daemon_addr(call, m.host, 6789, 0),
            "rank": ceph.rank(m.name),
            "service": 1,
            "direxists": "1",
            "ceph_version": _version_string(m.version),
            "ceph_version_short": m.version,
        }
        if m.name in quorum:
            row.update(quorum=1, state="running")
        elif not quorum:
            row["state"] = "unknown"
        else:
            row["state"] = "stopped"
        rows.append(row)
    for m in ceph.stale_mons.values():  # get_services_info: its mon dir and ceph.conf section; no rank, no quorum
        node = call.cluster.nodes.get(m.host)
        addr = node.ip if node else None
        rows.append({"name": m.name, "host": m.host, "addr": addr, "service": 1, "direxists": "1", "state": "stopped"})
    return sorted(rows, key=lambda r: str(r["name"]))  # PVE's order is a Perl hash's; sorted for stable output


@route("GET", "/nodes/{node}/ceph/mds")
def mds_list(call: Call) -> list[dict[str, Any]]:
    """Ceph/MDS.pm index: get_services_info merged with ``mds stat`` (state up:active / up:standby, rank)."""
    ceph = _ceph(call)
    rows = []
    for d in sorted(ceph.mds, key=lambda d: d.name):
        row: dict[str, Any] = {"name": d.name, "host": d.host, "service": 1, "direxists": "1", "state": "stopped"}
        row["addr"] = daemon_addr(call, d.host, 6800, _nonce(d.name))
        if d.state != "stopped":  # `mds metadata` knows a daemon that ran: its versions
            row.update(
                ceph_version=_version_string(d.version or ceph.version), ceph_version_short=d.version or ceph.version
            )
            row.update(rank=0 if d.state == "active" else -1, standby_replay=0, state=f"up:{d.state}")
            if d.state == "active":
                row["fs_name"] = "cephfs"
        rows.append(row)
    return rows


@route("GET", "/nodes/{node}/ceph/mgr")
def mgr_list(call: Call) -> list[dict[str, Any]]:
    """Ceph/MGR.pm index: get_services_info with state active / standby from ``mgr dump``."""
    ceph = _ceph(call)
    active, standbys = ceph.active_mgr(), ceph.standby_mgrs()
    rows = []
    for m in sorted(ceph.mgrs, key=lambda m: m.name):
        state = "active" if m is active else "standby" if m in standbys else "stopped"
        row: dict[str, Any] = {"name": m.name, "host": m.host, "service": 1, "direxists": "1", "state": state}
        version = m.version or ceph.version  # `mgr metadata`: the address and version each manager reported
        row.update(addr=daemon_addr(call, m.host, 0, _nonce(m.name)), ceph_version=_version_string(version))
        row["ceph_version_short"] = version
        rows.append(row)
    return rows


@route("GET", "/nodes/{node}/ceph/cmd-safety")
def cmd_safety(call: Call) -> dict[str, Any]:
    """PVE/API2/Ceph.pm cmd_safety: ``<service> ok-to-stop`` through librados; safe when Ceph returns 0."""
    ceph = _ceph(call)
    service, ident, action = call.params["service"], str(call.params["id"]), call.params["action"]
    if service == "mds":
        if action != "stop":
            raise ApiError(500, f"Service does not support this action: {service}: {action}")
        safe, message = ceph.mds_ok_to_stop(ident)
        return {"safe": b(safe), "status": message}
    if service == "osd" and action == "destroy":  # safe-to-destroy: out, down and no longer holding data
        osd = ceph.osds.get(int(ident)) if ident.isdecimal() else None
        if osd is None:
            return {"safe": 0, "status": f"osd.{ident} does not exist"}
        ok = not osd.up and not osd.in_
        return {"safe": b(ok), "status": f"OSD(s) {ident} are {'' if ok else 'not yet '}safe to destroy"}
    if service == "osd":
        try:
            ids = {int(i) for i in ident.replace(" ", ",").split(",") if i}
        except ValueError:
            return {"safe": 0, "status": f"invalid osd id '{ident}'"}
        safe, message = ceph.osd_ok_to_stop(ids)
    else:
        safe, message = ceph.mon_ok_to_stop(ident)
    return {"safe": b(safe), "status": message}
