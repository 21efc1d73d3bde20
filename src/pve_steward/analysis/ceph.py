"""Ceph through PVE's API: health checks explained, OSDs, pools, flags, monitors, versions, node-loss capacity.

Inputs are the payloads of ``GET /cluster/ceph/status`` (``ceph status``), ``/cluster/ceph/flags``,
``/cluster/ceph/metadata``, and one node's ``/nodes/{n}/ceph/osd`` (the whole CRUSH tree),
``/ceph/pool`` and ``/ceph/mon``. A cluster without Ceph has ``ceph_status`` None and gets no findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Any, Protocol

from pve_steward.analysis.catalog import Code
from pve_steward.analysis.catalog import check as check_unit
from pve_steward.analysis.cephexplain import explain
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

Row = dict[str, Any]

NEARFULL_RATIO = 0.85  # Ceph's mon_osd_nearfull_ratio default
POOL_WARN_RATIO = 0.80  # pool percent_used (of what it can still grow to) that deserves attention
POOL_CRIT_RATIO = 0.90
LATENCY_FLOOR_MS = 50  # below this no OSD is an outlier, whatever the median
LATENCY_FACTOR = 5  # an outlier answers this many times slower than the median OSD
HEALTH_SEVERITY = {"HEALTH_ERR": Severity.CRITICAL, "HEALTH_WARN": Severity.WARNING}  # PVE.Utils.map_ceph_health
# What a check's summary does not say; Ceph's severity stays (PG_AVAILABILITY is HEALTH_WARN, PGMap.cc)
HEALTH_IMPACT = {
    "PG_AVAILABILITY": "I/O to those PGs is blocked: guests using their pools hang",
    "OBJECT_UNFOUND": "I/O to the unfound objects is blocked until an OSD holding them returns",
}
FLAG_RISK = {
    "pause": "all client reads and writes are stopped",
    "noout": "failed OSDs are never marked out, so their data is not re-replicated",
    "norebalance": "data is not rebalanced after a change of the CRUSH map",
    "norecover": "degraded placement groups are not recovered",
    "nobackfill": "backfill is suspended, so new or returning OSDs never fill",
    "noup": "OSDs that start are not marked up",
    "nodown": "failed OSDs are not marked down, client I/O to them hangs",
    "noin": "returning OSDs are not marked in",
    "noscrub": "scrubbing is off, silent corruption goes unnoticed",
    "nodeep-scrub": "deep scrubbing is off, silent corruption goes unnoticed",
    "notieragent": "cache tiering is suspended",
}
CRITICAL_FLAGS = {"pause", "norecover", "nodown", "noup"}


@dataclass
class CephData:
    """The Ceph payloads; ``status`` None means the cluster has no Ceph (or it could not be read)."""

    status: Row | None = None
    flags: list[Row] = field(default_factory=list)
    metadata: Row = field(default_factory=dict)
    osd_tree: Row = field(default_factory=dict)
    pools: list[Row] = field(default_factory=list)
    mons: list[Row] = field(default_factory=list)
    node: str | None = None  # the Ceph node whose /nodes/{n}/ceph/* answered (not every node runs Ceph)


def osds(tree: Row) -> list[Row]:
    """Every OSD leaf of ``/nodes/{n}/ceph/osd``'s CRUSH tree, with ``host`` as Ceph/OSD.pm sets it."""
    out: list[Row] = []

    def walk(node: Row, host: str | None) -> None:
        if node.get("type") == "osd":
            out.append(dict(node, host=node.get("host") or host))
            return
        here = str(node["name"]) if node.get("type") == "host" else host
        for child in node.get("children") or []:
            walk(child, here)

    walk(tree.get("root") or {}, None)
    return sorted(out, key=lambda o: int(o.get("id", 0)))


def flag_is_set(row: object) -> bool:
    """A ``/cluster/ceph/flags`` row's value: PVE sends 0/1; a decoded JSON true counts, odd values do not."""
    value = row.get("value") if isinstance(row, dict) else None
    return value is True or str(value).strip() == "1"


def noout_set(flags: list[Row]) -> bool:
    """Is the cluster-wide noout set (``/cluster/ceph/flags``)?"""
    return any(isinstance(f, dict) and f.get("name") == "noout" and flag_is_set(f) for f in flags or [])


def _subject(ident: str, node: str | None = None) -> Subject:
    return Subject(kind="ceph", id=ident, node=node)


class _WithCeph(Protocol):  # ClusterData (analysis/data.py imports this module, so not named here)
    ceph: CephData | None


@check_unit(
    "ceph",
    codes=[
        Code(
            "CEPH_HEALTH_CHECK",
            "warning",
            "Ceph reports a health check",
            "An entry of health.checks in /cluster/ceph/status, explained (meaning, likely cause, next action). "
            "HEALTH_ERR checks are critical, HEALTH_WARN warnings, muted checks info.",
            "Follow the next action in the finding; `ceph health detail` names the daemons and PGs.",
        ),
        Code(
            "CEPH_OSD_DOWN",
            "critical",
            "Ceph OSD down",
            "An OSD's status is down. Critical while it is still in (its data is degraded), warning once out.",
            "Check the OSD's daemon and disk on its host (systemctl status ceph-osd@<id>); start it or replace the "
            "disk.",
        ),
        Code(
            "CEPH_OSD_OUT",
            "warning",
            "Ceph OSD up but out",
            "An OSD is up and out: CRUSH places no data on it, its capacity is unused.",
            "If it was taken out for maintenance and is healthy, mark it in (ceph osd in <id>).",
        ),
        Code(
            "CEPH_OSD_LATENCY_HIGH",
            "warning",
            "Ceph OSD much slower than the others",
            "An up OSD's commit latency is at least 50 ms and five times the median OSD's: one slow disk slows "
            "every write to the PGs it holds.",
            "Check the disk's SMART state and wear; replace it or mark the OSD out.",
        ),
        Code(
            "CEPH_POOL_NEAR_FULL",
            "warning",
            "Ceph pool nearly full",
            "A pool's percent_used (stored over stored plus MAX AVAIL) is at least 80 %; critical at 90 %.",
            "Add OSDs, delete data, or rebalance the fullest OSDs (MAX AVAIL follows the fullest OSD).",
        ),
        Code(
            "CEPH_POOL_LOW_REDUNDANCY",
            "warning",
            "Ceph pool with too few replicas",
            "As PVE's pool editor warns: min_size is 1 (critical, ours: writes are accepted with a single copy), "
            "or min_size is below half of size (and not equal to it), which can lose data or leave PGs "
            "incomplete.",
            "Raise min_size above half of size (size 3, min_size 2: ceph osd pool set <pool> min_size 2; raise "
            "size first if capacity allows).",
        ),
        Code(
            "CEPH_POOL_AUTOSCALE_WARN",
            "warning",
            "Ceph pool PG count differs from the autoscaler's",
            "pg_autoscale_mode is warn and pg_num differs from the autoscaler's pg_num_final.",
            "Set pg_autoscale_mode on, or set pg_num to the recommended value.",
        ),
        Code(
            "CEPH_FLAG_SET",
            "warning",
            "Ceph OSD flag left set",
            "A cluster-wide OSD flag is set (noout, norebalance, ...); critical for pause, norecover, nodown, noup.",
            "If no maintenance is running, unset it (ceph osd unset <flag>, or the ceph_unset_flag operation).",
        ),
        Code(
            "CEPH_MON_OUT_OF_QUORUM",
            "warning",
            "Ceph monitor out of quorum",
            "A monitor of the monmap is not in quorum; critical when one more monitor failure would lose quorum "
            "(a majority of the monmap's monitors).",
            "Bring the monitor back (systemctl status ceph-mon@<name> on its host).",
        ),
        Code(
            "CEPH_MON_NOT_IN_MONMAP",
            "info",
            "Ceph monitor configured but not in the monmap",
            "PVE lists a monitor (a [mon.<id>] section of ceph.conf or a monitor directory on a node) that has no "
            "rank: it is not a member of Ceph's monmap and neither counts for nor against quorum. Usually the "
            "leftover of a monitor removed by hand.",
            "If the monitor was removed on purpose, delete its leftovers: the [mon.<id>] section of "
            "/etc/pve/ceph.conf and /var/lib/ceph/mon/ceph-<id> on its node; otherwise re-create it (pveceph mon "
            "destroy, then pveceph mon create).",
        ),
        Code(
            "CEPH_VERSION_MIXED",
            "warning",
            "Ceph daemons on different versions",
            "A running Ceph daemon (monitor, manager, MDS, up OSD) is on an older version than the newest installed on "
            "the cluster's nodes (or, without their installed versions, the newest running), as PVE's Ceph panel "
            "marks it.",
            "Restart the daemons whose node has the newest version installed; on nodes with an older one, upgrade "
            "the Ceph packages first, then restart their daemons.",
        ),
        Code(
            "CEPH_NODE_LOSS_NEARFULL",
            "warning",
            "Losing one node would fill Ceph",
            "Raw use over the in OSDs' capacity without the largest host's would reach nearfull (85 %); critical "
            "at 95 %.",
            "Add capacity before maintenance or a failure forces re-replication onto the remaining OSDs.",
        ),
    ],
    anchors=[
        "check_pve:ceph-health=CEPH_HEALTH_CHECK",
        "pve8to9:ceph-health=CEPH_HEALTH_CHECK",
        "pve8to9:ceph-mixed=CEPH_VERSION_MIXED",
    ],
    pve="pve-manager PVE/API2/Cluster/Ceph.pm status + PVE/API2/Ceph/OSD.pm index + PVE/API2/Ceph/Pool.pm lspools",
)
def analyze_ceph_cluster(data: _WithCeph, t: Thresholds | None = None) -> list[Finding]:
    """The health check's Ceph area: nothing on a cluster without Ceph (or whose Ceph was not read)."""
    return analyze_ceph(data.ceph) if data.ceph else []


def analyze_ceph(c: CephData) -> list[Finding]:
    """Every Ceph check; nothing when the cluster has no Ceph."""
    if c.status is None:
        return []
    return (
        health_findings(c.status)
        + osd_findings(c.osd_tree)
        + pool_findings(c.pools)
        + flag_findings(c.flags)
        + mon_findings(c.mons)
        + version_findings(c.metadata, c.osd_tree)
        + node_loss_findings(c.osd_tree)
    )


@pve_rule(
    "ceph.health",
    rule="PVE's Ceph status is `ceph status` verbatim: health.status is HEALTH_OK/WARN/ERR and health.checks "
    "holds one entry per failing check, keyed by Ceph's check name with its severity and summary; PVE's GUI "
    "shows HEALTH_WARN as a warning and HEALTH_ERR as an error (Ceph's own severity, never escalated).",
    pve="pve-manager PVE/API2/Cluster/Ceph.pm status + PVE/Ceph/Tools.pm ceph_cluster_status + "
    "www/manager6/Utils.js map_ceph_health",
    codes=("CEPH_HEALTH_CHECK",),
)
def health_findings(status: Row) -> list[Finding]:
    health = status.get("health") or {}
    out = []
    for name, check in sorted((health.get("checks") or {}).items()):
        summary = (check.get("summary") or {}).get("message") or name
        info = explain(str(name))
        muted = bool(check.get("muted"))
        severity = Severity.INFO if muted else HEALTH_SEVERITY.get(str(check.get("severity")), Severity.WARNING)
        out.append(
            finding(
                "CEPH_HEALTH_CHECK",
                _subject(f"health/{name}"),
                f"Ceph {check.get('severity', 'HEALTH_WARN')} {name}: {summary}"
                + (f"; {HEALTH_IMPACT[name]}" if name in HEALTH_IMPACT else ""),
                {
                    "check": name,
                    "ceph_severity": check.get("severity"),
                    "summary": summary,
                    "count": (check.get("summary") or {}).get("count"),
                    "muted": muted,
                    "health_status": health.get("status"),
                    "meaning": info.meaning,
                    "likely_cause": info.cause,
                },
                remediation=info.action,
                severity=severity,
            )
        )
    return out


@pve_rule(
    "ceph.osd-state",
    rule="An OSD is 'up' or 'down' (is its daemon answering) and 'in' or 'out' (does CRUSH place data on it); "
    "PVE's OSD tree shows both per OSD with its usage and commit/apply latency.",
    pve="pve-manager PVE/API2/Ceph/OSD.pm index",
    codes=("CEPH_OSD_DOWN", "CEPH_OSD_OUT", "CEPH_OSD_LATENCY_HIGH"),
)
def osd_findings(tree: Row) -> list[Finding]:
    out = []
    rows = osds(tree)
    for o in rows:
        name, host = str(o.get("name") or f"osd.{o.get('id')}"), o.get("host")
        evidence = {"osd": name, "host": host, "status": o.get("status"), "in": o.get("in")}
        if o.get("status") == "down":
            inn = int(o.get("in", 1) or 0) == 1
            out.append(
                finding(
                    "CEPH_OSD_DOWN",
                    _subject(name, host),
                    f"{name} on {host} is down" + (" and still in: its data is degraded" if inn else " and out"),
                    evidence,
                    severity=Severity.CRITICAL if inn else Severity.WARNING,
                )
            )
        elif int(o.get("in", 1) or 0) == 0:
            out.append(finding("CEPH_OSD_OUT", _subject(name, host), f"{name} on {host} is up but out", evidence))
    latencies = [int(o.get("commit_latency_ms") or 0) for o in rows if o.get("status") == "up"]
    if len(latencies) >= 3:
        typical = median(latencies)
        for o in rows:
            lat = int(o.get("commit_latency_ms") or 0)
            if o.get("status") == "up" and lat >= LATENCY_FLOOR_MS and lat >= LATENCY_FACTOR * max(typical, 1):
                name = str(o.get("name") or f"osd.{o.get('id')}")
                out.append(
                    finding(
                        "CEPH_OSD_LATENCY_HIGH",
                        _subject(name, o.get("host")),
                        f"{name} on {o.get('host')} commits in {lat} ms, the median OSD in {typical:g} ms",
                        {
                            "osd": name,
                            "commit_latency_ms": lat,
                            "apply_latency_ms": o.get("apply_latency_ms"),
                            "median_ms": typical,
                        },
                    )
                )
    return out


@pve_rule(
    "ceph.pool",
    rule="A pool's percent_used is `ceph df`'s fraction of what the pool can still hold (stored over stored plus "
    "MAX AVAIL); size is the replica count and min_size the replicas a PG needs to serve I/O.",
    pve="pve-manager PVE/API2/Ceph/Pool.pm lspools",
    codes=("CEPH_POOL_NEAR_FULL", "CEPH_POOL_LOW_REDUNDANCY", "CEPH_POOL_AUTOSCALE_WARN"),
)
def pool_findings(pools: list[Row]) -> list[Finding]:
    out = []
    for p in sorted(pools, key=lambda r: str(r.get("pool_name"))):
        name = str(p.get("pool_name"))
        subject = _subject(f"pool/{name}")
        used = float(p.get("percent_used") or 0.0)
        if used > 1:  # some releases report percent, not a fraction
            used /= 100
        if used >= POOL_WARN_RATIO:
            out.append(
                finding(
                    "CEPH_POOL_NEAR_FULL",
                    subject,
                    f"pool {name} is {used:.0%} full",
                    {"pool": name, "percent_used": round(used, 4), "bytes_used": p.get("bytes_used")},
                    severity=Severity.CRITICAL if used >= POOL_CRIT_RATIO else Severity.WARNING,
                )
            )
        out += _redundancy(p, name, subject)
        final = p.get("pg_num_final")
        if p.get("pg_autoscale_mode") == "warn" and final is not None and int(final) != int(p.get("pg_num") or 0):
            out.append(
                finding(
                    "CEPH_POOL_AUTOSCALE_WARN",
                    subject,
                    f"pool {name} has {p.get('pg_num')} PGs; the autoscaler recommends {final}",
                    {"pool": name, "pg_num": p.get("pg_num"), "pg_num_final": final, "mode": "warn"},
                )
            )
    return out


def _int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


@pve_rule(
    "ceph.pool-min-size",
    rule="PVE's pool editor warns when min_size is 1 ('can lead to data loss') or when min_size < size/2 and "
    "min_size != size ('can lead to data loss, incomplete PGs or unfound objects').",
    pve="pve-manager www/manager6/ceph/Pool.js showMinSizeOneWarning + showMinSizeHalfWarning",
    codes=("CEPH_POOL_LOW_REDUNDANCY",),
)
def _redundancy(p: Row, name: str, subject: Subject) -> list[Finding]:
    size, min_size = _int(p.get("size")), _int(p.get("min_size"))
    if size is None or min_size is None or name.startswith("."):  # ".mgr"-style internal pools: ours to skip
        return []
    if min_size == 1:
        warning = "a min_size of 1 is not recommended and can lead to data loss"
    elif min_size < size / 2 and min_size != size:
        warning = "min_size < size/2 can lead to data loss, incomplete PGs or unfound objects"
    else:
        return []
    return [
        finding(
            "CEPH_POOL_LOW_REDUNDANCY",
            subject,
            f"pool {name} has size {size}, min_size {min_size}: {warning}",
            {"pool": name, "size": size, "min_size": min_size, "type": p.get("type"), "pve_warning": warning},
            # ours, stricter than PVE's warning sign: min_size 1 accepts writes with a single copy
            severity=Severity.CRITICAL if min_size == 1 else Severity.WARNING,
        )
    ]


@pve_rule(
    "ceph.flags",
    rule="The OSD map flags (noout, norebalance, pause, ...) are cluster-wide switches an operator sets for "
    "maintenance; PVE lists each with value 1 when set.",
    pve="pve-manager PVE/API2/Cluster/Ceph.pm get_flags + PVE/Ceph/Tools.pm get_possible_osd_flags",
    codes=("CEPH_FLAG_SET",),
)
def flag_findings(flags: list[Row]) -> list[Finding]:
    out = []
    for f in flags:
        name = str(f.get("name")) if isinstance(f, dict) else ""
        if not flag_is_set(f):
            continue
        out.append(
            finding(
                "CEPH_FLAG_SET",
                _subject(f"flag/{name}"),
                f"Ceph flag {name} is set: {FLAG_RISK.get(name, 'a maintenance switch is still on')}",
                {"flag": name, "description": f.get("description")},
                remediation=f"If no maintenance is running, unset it: ceph osd unset {name} "
                f"(or PUT /cluster/ceph/flags/{name} value=0).",
                severity=Severity.CRITICAL if name in CRITICAL_FLAGS else Severity.WARNING,
            )
        )
    return out


@pve_rule(
    "ceph.mon-quorum",
    rule="listmon lists every monitor PVE knows of (monmap, ceph.conf [mon.<id>] sections, monitor directories); "
    "only monmap members get a rank, and one whose rank is in quorum_status's quorum has quorum=1. Ceph needs "
    "more than half of the monmap's monitors in quorum.",
    pve="pve-manager PVE/API2/Ceph/MON.pm listmon + PVE/Ceph/Services.pm get_services_info",
    codes=("CEPH_MON_OUT_OF_QUORUM", "CEPH_MON_NOT_IN_MONMAP"),
)
def mon_findings(mons: list[Row]) -> list[Finding]:
    rows = [m for m in mons or [] if isinstance(m, dict)]
    members = [m for m in rows if m.get("rank") is not None]
    if not members:  # no rank at all: listmon could not ask Ceph, the monmap is unknown
        members = rows
    out = []
    inq = [m for m in members if _in_quorum(m)]
    for m in members:
        if _in_quorum(m):
            continue
        name = str(m.get("name"))
        spare = len(inq) - (len(members) // 2 + 1)
        out.append(
            finding(
                "CEPH_MON_OUT_OF_QUORUM",
                _subject(f"mon.{name}", _mon_host(m)),
                f"monitor {name} is not in quorum ({len(inq)} of {len(members)} are); "
                + ("losing one more loses quorum" if spare <= 0 else f"{spare} more may fail"),
                {"mon": name, "state": m.get("state"), "in_quorum": len(inq), "monitors": len(members)},
                severity=Severity.CRITICAL if spare <= 0 else Severity.WARNING,
            )
        )
    for m in rows:
        if any(m is member for member in members):
            continue
        name = str(m.get("name"))
        out.append(
            finding(
                "CEPH_MON_NOT_IN_MONMAP",
                _subject(f"mon.{name}", _mon_host(m)),
                f"monitor {name} is configured but not in the monmap: it does not count for quorum",
                {"mon": name, "state": m.get("state"), "host": _mon_host(m), "monmap_members": len(members)},
            )
        )
    return out


def _in_quorum(mon: Row) -> bool:
    return str(mon.get("quorum")).strip() in ("1", "True")


def _mon_host(mon: Row) -> str | None:
    host = mon.get("host")
    return host if isinstance(host, str) and host else None


@pve_rule(
    "ceph.versions",
    rule="PVE's Ceph panel compares every daemon's running version with the newest version installed on any node "
    "(metadata.node[*].version, broadcast by pvestatd): a daemon on another version is 'please restart' when its "
    "own node has that newest version installed, else 'please upgrade and restart'. OSDs count only while up, as "
    "`ceph versions` counts them.",
    pve="pve-manager www/manager6/ceph/Services.js updateAll (maxversion, HEALTH_OLD/HEALTH_UPGRADE), "
    "www/manager6/ceph/OSD.js render_version; PVE/API2/Cluster/Ceph.pm metadata; Ceph OSDMonitor count_metadata",
    codes=("CEPH_VERSION_MIXED",),
)
def version_findings(metadata: Row, tree: Row | None = None) -> list[Finding]:
    running = _running_versions(metadata, tree or {})
    installed = installed_versions(metadata)
    # the GUI's maxversion is the newest installed; without the nodes' versions, the newest running
    candidates = list(installed.values()) or [v for _, _, v in running]
    if not candidates:
        return []
    newest = max(candidates, key=_version_key)
    older: dict[str, list[str]] = {}
    restart: list[str] = []
    upgrade: dict[str, str] = {}
    for daemon, host, version in running:
        if _version_key(version) >= _version_key(newest):
            continue
        older.setdefault(version, []).append(daemon)
        on_host = installed.get(host)
        if not installed or on_host == newest:
            restart.append(daemon)
        else:
            upgrade[host] = on_host or "unknown"
    if not older:
        return []
    count = sum(len(d) for d in older.values())
    said = []
    if restart:
        said.append(f"{len(restart)} need a restart ({newest} is installed on their node)")
    if upgrade:
        said.append(f"nodes {', '.join(sorted(upgrade))} need the {newest} packages first, then a restart")
    return [
        finding(
            "CEPH_VERSION_MIXED",
            _subject("versions"),
            f"{count} Ceph daemon(s) run older versions than {newest}: {'; '.join(said)}",
            {
                "newest": newest,
                "older": {v: sorted(ds) for v, ds in older.items()},
                "restart": sorted(restart),
                "upgrade_nodes": dict(sorted(upgrade.items())),
            },
        )
    ]


def _running_versions(metadata: Row, tree: Row) -> list[tuple[str, str, str]]:
    """(daemon, node, ceph_version_short) of every running daemon (OSDs: up only)."""
    out = []
    for kind in ("mon", "mgr", "osd", "mds"):
        daemons = metadata.get(kind) if isinstance(metadata, dict) else None
        # Cluster/Ceph.pm metadata keys mon/mgr/mds "<name>@<host>" (the GUI's host); Ceph's rows carry hostname
        keyed = {id(r): str(k).partition("@")[2] for k, r in daemons.items()} if isinstance(daemons, dict) else {}
        for d in running_daemons(metadata, kind, tree):
            version = d.get("ceph_version_short")
            if not version:
                continue
            ident = d.get("name") if kind != "osd" else d.get("id", d.get("name"))
            out.append((f"{kind}.{ident}", keyed.get(id(d)) or str(d.get("hostname") or ""), str(version)))
    return out


def installed_versions(metadata: Row) -> dict[str, str]:
    """node -> the Ceph version installed there (metadata.node, what pvestatd broadcasts)."""
    nodes = metadata.get("node") if isinstance(metadata, dict) else None
    out = {}
    for name, row in (nodes or {}).items() if isinstance(nodes, dict) else ():
        version = (row.get("version") or {}).get("str") if isinstance(row, dict) else None
        if isinstance(version, str) and version:
            out[str(name)] = version
    return out


def running_daemons(metadata: Row, kind: str, tree: Row) -> list[Row]:
    """The ``kind`` rows of ``/cluster/ceph/metadata``; for OSDs only those the CRUSH tree shows up.

    ``osd metadata`` (what PVE returns) lists every existing OSD, down ones with the version they last ran;
    ``ceph versions`` (pve8to9) counts up OSDs only. Without a tree every OSD row is kept (up is unknown).
    """
    daemons = metadata.get(kind) if isinstance(metadata, dict) else None
    rows = [d for d in (daemons.values() if isinstance(daemons, dict) else daemons or []) if isinstance(d, dict)]
    if kind != "osd":
        return rows
    listed = {str(o.get("id")): o.get("status") for o in osds(tree) if isinstance(o, dict)}
    if not listed:
        return rows
    # ceph src/mon/OSDMonitor.cc count_metadata: if (osdmap.is_up(osd))
    return [d for d in rows if listed.get(str(d.get("id"))) == "up"]


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdecimal())


@pve_rule(
    "ceph.node-loss",
    rule="When a host's OSDs go down and out, Ceph re-replicates their data onto the remaining OSDs; an OSD "
    "at mon_osd_nearfull_ratio (0.85) raises OSD_NEARFULL.",
    pve="pve-manager PVE/API2/Ceph/OSD.pm index (total_space, bytes_used per OSD)",
    codes=("CEPH_NODE_LOSS_NEARFULL",),
)
def node_loss_findings(tree: Row) -> list[Finding]:
    """Would the cluster be near-full after losing the biggest host's OSDs? (raw use, evenly spread)."""
    rows = [o for o in osds(tree) if int(o.get("in", 1) or 0)]
    total = sum(int(o.get("total_space") or 0) for o in rows)
    used = sum(int(o.get("bytes_used") or 0) for o in rows)
    per_host: dict[str, int] = {}
    for o in rows:
        per_host[str(o.get("host"))] = per_host.get(str(o.get("host")), 0) + int(o.get("total_space") or 0)
    if len(per_host) < 2 or not total:
        return []
    host, lost = max(per_host.items(), key=lambda kv: (kv[1], kv[0]))
    after = used / (total - lost) if total > lost else 1.0
    if after < NEARFULL_RATIO:
        return []
    return [
        finding(
            "CEPH_NODE_LOSS_NEARFULL",
            _subject("capacity"),
            f"losing {host}'s OSDs would leave the cluster {after:.0%} full (nearfull at {NEARFULL_RATIO:.0%})",
            {"host": host, "used_now": round(used / total, 4), "used_after": round(after, 4), "raw_total": total},
            severity=Severity.CRITICAL if after >= 0.95 else Severity.WARNING,
        )
    ]
