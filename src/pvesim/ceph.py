"""A Ceph cluster behind PVE's Ceph API: OSDs, pools, monitors, flags, and what Ceph derives from them.

Health checks, ``ok-to-stop`` answers and pool usage are computed from the model the way Ceph does,
simplified to a single CRUSH root with the host as failure domain (PVE's default replicated rule):
a pool's PG has its ``size`` replicas on distinct hosts, so a PG can lose one replica per impaired
host, and it stays active while at least ``min_size`` replicas are up (OSDMap.cc ``check_health``,
OSDMonitor ``ok-to-stop``, Monitor quorum arithmetic).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pvesim import pveconfig

FLAGS = (
    "nobackfill",
    "nodeep-scrub",
    "nodown",
    "noin",
    "noout",
    "norebalance",
    "norecover",
    "noscrub",
    "notieragent",
    "noup",
    "pause",
)
FLAG_DESCRIPTIONS = {  # pve-manager PVE/Ceph/Tools.pm get_possible_osd_flags
    "pause": "Pauses read and writes.",
    "noup": "OSDs are not allowed to start.",
    "nodown": "OSD failure reports are being ignored, such that the monitors will not mark OSDs down.",
    "noout": "OSDs will not automatically be marked out after the configured interval.",
    "noin": "OSDs that were previously marked out will not be marked back in when they start.",
    "nobackfill": "Backfilling of PGs is suspended.",
    "norebalance": "Rebalancing of PGs is suspended.",
    "norecover": "Recovery of PGs is suspended.",
    "noscrub": "Scrubbing is disabled.",
    "nodeep-scrub": "Deep Scrubbing is disabled.",
    "notieragent": "Cache tiering activity is suspended.",
}
RELEASES = {"17": "quincy", "18": "reef", "19": "squid"}


@dataclass
class Osd:
    id: int
    host: str
    total: int
    used: int
    up: bool = True
    in_: bool = True
    latency_ms: int = 2
    device_class: str = "ssd"
    version: str = ""


@dataclass
class Pool:
    id: int
    name: str
    size: int = 3
    min_size: int = 2
    pg_num: int = 128
    stored: int = 0  # user data; raw use is stored * size
    autoscale_mode: str = "on"
    pg_num_final: int | None = None
    quota_max_bytes: int = 0
    pg_num_min: int | None = None  # options Ceph only reports when set
    target_size: int | None = None
    target_size_ratio: float | None = None
    application: str = "rbd"  # osd pool application: rbd, cephfs, mgr, rgw


@dataclass
class Mon:
    name: str
    host: str
    up: bool = True
    avail_pct: int = 80  # free space of the mon's data directory
    version: str = ""


@dataclass
class Daemon:
    """A manager or metadata server: ``state`` is a manager's up/down, an MDS's active/standby/stopped."""

    name: str
    host: str
    state: str = "standby"
    version: str = ""


@dataclass
class Ceph:
    fsid: str
    version: str
    osds: dict[int, Osd] = field(default_factory=dict)
    pools: dict[str, Pool] = field(default_factory=dict)
    mons: dict[str, Mon] = field(default_factory=dict)  # the monmap
    stale_mons: dict[str, Mon] = field(default_factory=dict)  # a [mon.<id>] section and mon dir, not in the monmap
    mgrs: list[Daemon] = field(default_factory=list)  # state "up" or "down"; the first up one is active
    mds: list[Daemon] = field(default_factory=list)  # state "active", "standby" or "stopped"
    flags: set[str] = field(default_factory=set)
    extra_checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    config: dict[str, dict[str, Any]] = field(default_factory=dict)  # ceph.conf changes: section -> key -> value
    installed: set[str] = field(default_factory=set)  # nodes with the Ceph packages (ceph-mon); others compute-only
    api_node: str = ""  # the node answering the API: /cluster/ceph/* run there (no proxyto)
    # node -> the Ceph packages' version there, when not ``version`` (an upgrade half done: apt ran, no restart
    # yet, or not yet on that node); pvestatd broadcasts it (PVE/Ceph/Services.pm broadcast_ceph_versions)
    installed_versions: dict[str, str] = field(default_factory=dict)
    inited: bool = True  # False: the packages are there, ``pveceph init`` never ran (no /etc/pve/ceph.conf)
    configdb: list[dict[str, Any]] = field(default_factory=list)  # ``ceph config dump``'s entries
    nearfull_ratio: float = 0.85
    backfillfull_ratio: float = 0.90
    full_ratio: float = 0.95

    # ------------------------------------------------------------ placement arithmetic

    @property
    def hosts(self) -> list[str]:
        return sorted({o.host for o in self.osds.values()})

    def impaired_hosts(self, stopped: Collection[int] = ()) -> set[str]:
        """Hosts with an OSD that is down (or would be, after stopping ``stopped``) while still in."""
        return {o.host for o in self.osds.values() if o.in_ and (not o.up or o.id in stopped)}

    def worst_replicas(self, pool: Pool, impaired: set[str]) -> int:
        """The fewest up replicas any PG of the pool has: one replica per impaired host, at worst."""
        return pool.size - min(len(impaired), pool.size)

    def inactive_pools(self, stopped: Collection[int] = ()) -> list[Pool]:
        impaired = self.impaired_hosts(stopped)
        return [p for p in self.pools.values() if self.worst_replicas(p, impaired) < p.min_size]

    def pgs_at_risk(self, pools: list[Pool]) -> int:
        return sum(p.pg_num for p in pools)

    # ------------------------------------------------------------ usage

    def raw_total(self) -> int:
        return sum(o.total for o in self.osds.values() if o.in_)

    def raw_used(self) -> int:
        return sum(o.used for o in self.osds.values())

    def max_avail(self, pool: Pool) -> int:
        """Ceph's MAX AVAIL: what the fullest in OSD allows up to full_ratio, over the in OSDs, per replica."""
        ins = [o for o in self.osds.values() if o.in_ and o.total]
        if not ins:
            return 0
        headroom = min(o.total * self.full_ratio - o.used for o in ins) / max(o.total for o in ins)
        raw = max(0.0, headroom) * sum(o.total for o in ins)
        return int(raw / max(pool.size, 1))

    def autoscale_status(self, pool: Pool) -> dict[str, Any]:
        """One pool of ``osd pool autoscale-status -f json`` (the pg_autoscaler module, on since Octopus): its
        target is the scenario's pg_num_final, else the current pg_num."""
        final = pool.pg_num_final if pool.pg_num_final is not None else pool.pg_num
        capacity = sum(o.total for o in self.osds.values() if o.in_) or 1
        raw_used = pool.stored * pool.size
        return {
            "pool_id": pool.id,
            "pool_name": pool.name,
            "crush_root_id": -1,
            "pg_autoscale_mode": pool.autoscale_mode,
            "target_bytes": pool.target_size or 0,
            "target_ratio": pool.target_size_ratio or 0.0,
            "effective_target_ratio": pool.target_size_ratio or 0.0,
            "logical_used": pool.stored,
            "raw_used_rate": float(pool.size),
            "raw_used": raw_used,
            "actual_raw_used": float(raw_used),
            "subtree_capacity": capacity,
            "capacity_ratio": round(raw_used / capacity, 6),
            "bias": 4.0 if pool.name.endswith("metadata") else 1.0,
            "pg_num_target": pool.pg_num,
            "pg_num_ideal": final,
            "pg_num_final": final,
            "would_adjust": final != pool.pg_num,
            "bulk": False,
        }

    def pool_stats(self, pool: Pool) -> dict[str, Any]:
        """One pool's ``stats`` of ``ceph df -f json``."""
        objects = pool.stored // (4 * 1024**2)
        return {
            "stored": pool.stored,
            "stored_data": pool.stored,
            "stored_omap": 0,
            "objects": objects,
            "kb_used": pool.stored * pool.size // 1024,
            "bytes_used": pool.stored * pool.size,
            "data_bytes_used": pool.stored * pool.size,
            "omap_bytes_used": 0,
            "percent_used": self.pool_percent(pool),
            "max_avail": self.max_avail(pool),
            "quota_objects": 0,
            "quota_bytes": pool.quota_max_bytes,
            "dirty": 0,
            "rd": objects * 3,
            "rd_bytes": pool.stored * 2,
            "wr": objects * 5,
            "wr_bytes": pool.stored * 3,
            "compress_bytes_used": 0,
            "compress_under_bytes": 0,
            "stored_raw": pool.stored * pool.size,
            "avail_raw": self.max_avail(pool) * pool.size,
        }

    def application_metadata(self, pool: Pool) -> dict[str, dict[str, str]]:
        """``osd pool application get``: the pool's application and its metadata (CephFS: data or metadata)."""
        if pool.application == "cephfs":
            meta = pool.name.endswith("metadata")
            return {"cephfs": {"metadata" if meta else "data": pool.name.rsplit("_", 1)[0]}}
        return {pool.application: {}}

    def pool_percent(self, pool: Pool) -> float:
        avail = self.max_avail(pool)
        return pool.stored / (pool.stored + avail) if pool.stored + avail else 0.0

    # ------------------------------------------------------------ monitors

    def quorum(self) -> list[Mon]:
        up = [m for m in self.mons.values() if m.up]
        return up if len(up) * 2 > len(self.mons) else []

    def rank(self, name: str) -> int:
        return sorted(self.mons).index(name)

    # ------------------------------------------------------------ managers and metadata servers

    def active_mgr(self) -> Daemon | None:
        return next((m for m in self.mgrs if m.state == "up"), None)

    def standby_mgrs(self) -> list[Daemon]:
        active = self.active_mgr()
        return [m for m in self.mgrs if m.state == "up" and m is not active]

    def mds_ok_to_stop(self, name: str) -> tuple[bool, str]:
        """MDSMonitor ``mds ok-to-stop``: an active MDS needs a standby to take its rank; unknown ids are fine."""
        known = next((d for d in self.mds if d.name == name and d.state != "stopped"), None)
        active = 1 if known and known.state == "active" else 0
        lost_standby = 1 if known and known.state == "standby" else 0
        standbys = sum(d.state == "standby" for d in self.mds)
        if standbys - lost_standby < active:
            return False, f"insufficent standby MDS daemons to stop active gids {{{name}}} and/or standby gids {{}}"
        return True, f"should be safe to stop [{name}]"

    # ------------------------------------------------------------ health (OSDMap/PGMap/Monitor checks)

    def health_checks(self) -> dict[str, dict[str, Any]]:
        checks: dict[str, dict[str, Any]] = {}

        def add(name: str, severity: str, message: str, count: int, detail: list[str] | None = None) -> None:
            checks[name] = {
                "severity": severity,
                "summary": {"message": message, "count": count},
                "detail": [{"message": d} for d in detail or []],
                "muted": False,
            }

        if self.flags:
            add("OSDMAP_FLAGS", "HEALTH_WARN", f"{','.join(sorted(self.flags))} flag(s) set", len(self.flags))
        down_in = [o for o in self.osds.values() if not o.up and o.in_]
        if down_in:
            add(
                "OSD_DOWN",
                "HEALTH_WARN",
                f"{len(down_in)} osds down",
                len(down_in),
                [f"osd.{o.id} (root=default,host={o.host}) is down" for o in down_in],
            )
            whole = [h for h in self.hosts if all(not o.up for o in self.osds.values() if o.host == h)]
            if whole:
                add("OSD_HOST_DOWN", "HEALTH_WARN", f"{len(whole)} host ({len(whole)} osds) down", len(whole))
        self._fullness_checks(add)
        impaired = self.impaired_hosts()
        degraded = [p for p in self.pools.values() if impaired and p.stored and p.size > 1]
        if degraded:
            pgs = self.pgs_at_risk(degraded)
            add(
                "PG_DEGRADED",
                "HEALTH_WARN",
                f"Degraded data redundancy: {pgs} pgs degraded, {pgs} pgs undersized",
                pgs,
                [f"pool {p.name} has degraded pgs" for p in degraded],
            )
        inactive = self.inactive_pools()
        if inactive:
            pgs = self.pgs_at_risk(inactive)
            # ceph src/mon/PGMap.cc get_health_checks: case UNAVAILABLE: "PG_AVAILABILITY", sev = HEALTH_WARN
            add("PG_AVAILABILITY", "HEALTH_WARN", f"Reduced data availability: {pgs} pgs inactive", pgs)
        norep = [p for p in self.pools.values() if p.size == 1]
        if norep:
            add("POOL_NO_REDUNDANCY", "HEALTH_WARN", f"{len(norep)} pool(s) have no replicas configured", len(norep))
        quota = [p for p in self.pools.values() if p.quota_max_bytes and p.stored >= 0.8 * p.quota_max_bytes]
        if quota:
            add("POOL_NEAR_FULL", "HEALTH_WARN", f"{len(quota)} pool(s) nearfull", len(quota))
        down_mons = [m for m in self.mons.values() if not m.up]
        if down_mons:
            names = ",".join(m.name for m in self.quorum())
            add(
                "MON_DOWN",
                "HEALTH_WARN",
                f"{len(down_mons)}/{len(self.mons)} mons down, quorum {names}",
                len(down_mons),
                [f"mon.{m.name} (rank {self.rank(m.name)}) is down (out of quorum)" for m in down_mons],
            )
        low = [m for m in self.mons.values() if m.up and m.avail_pct < 30]
        if low:
            add(
                "MON_DISK_LOW",
                "HEALTH_ERR" if any(m.avail_pct < 5 for m in low) else "HEALTH_WARN",
                f"mon{'s' if len(low) > 1 else ''} {','.join(m.name for m in low)} low on available space",
                len(low),
            )
        versions = {o.version for o in self.osds.values() if o.up} | {m.version for m in self.mons.values() if m.up}
        if len({v.split(".")[0] for v in versions}) > 1:
            add("DAEMON_OLD_VERSION", "HEALTH_WARN", "There are daemons running an older version of ceph", 1)
        checks.update(self.extra_checks)
        return checks

    def _fullness_checks(self, add: Any) -> None:
        levels = (
            ("OSD_FULL", "HEALTH_ERR", self.full_ratio, "full"),
            ("OSD_BACKFILLFULL", "HEALTH_WARN", self.backfillfull_ratio, "backfillfull"),
            ("OSD_NEARFULL", "HEALTH_WARN", self.nearfull_ratio, "nearfull"),
        )
        taken: set[int] = set()
        for name, severity, ratio, word in levels:
            hit = [
                o for o in self.osds.values() if o.up and o.total and o.used / o.total >= ratio and o.id not in taken
            ]
            taken |= {o.id for o in hit}
            if hit:
                add(
                    name,
                    severity,
                    f"{len(hit)} {word} osd(s)",
                    len(hit),
                    [f"osd.{o.id} is {word}" for o in hit],
                )
                if word == "nearfull":
                    add("POOL_NEARFULL", "HEALTH_WARN", f"{len(self.pools)} pool(s) nearfull", len(self.pools))

    def health_status(self) -> str:
        severities = {c["severity"] for c in self.health_checks().values()}
        return "HEALTH_ERR" if "HEALTH_ERR" in severities else "HEALTH_WARN" if severities else "HEALTH_OK"

    # ------------------------------------------------------------ ok-to-stop (OSDMonitor / MonmapMonitor)

    def osd_ok_to_stop(self, ids: set[int]) -> tuple[bool, str]:
        unknown = sorted(i for i in ids if i not in self.osds)
        if unknown:
            return False, f"osd(s) {','.join(map(str, unknown))} do not exist"
        inactive = self.inactive_pools(ids)
        names = ",".join(f"osd.{i}" for i in sorted(ids))
        if inactive:
            pgs = self.pgs_at_risk(inactive)
            return False, f"unsafe to stop osd(s) at this time ({pgs} PGs are or would become offline)"
        return True, (
            f"{names} are ok to stop without reducing availability or risking data, provided there are no "
            "other concurrent failures or interventions."
        )

    def mon_ok_to_stop(self, name: str) -> tuple[bool, str]:
        if name not in self.mons:
            return False, f"mon.{name} does not exist"
        rest = [m.name for m in self.mons.values() if m.up and m.name != name]
        if len(rest) * 2 > len(self.mons):
            return True, f"quorum should be preserved ({','.join(rest)}) after stopping [{name}]"
        return False, f"not enough monitors would be available ({','.join(rest)}) after stopping mons [{name}]"


# ------------------------------------------------------------------------------------------------- scenario


def _application(name: str) -> str:
    """The application a pool of this name has: '.mgr' the manager's, cephfs_* CephFS's, else RBD."""
    if name in (".mgr", "device_health_metrics"):
        return "mgr"
    return "cephfs" if "cephfs" in name else "rbd"


def _size(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else pveconfig.parse_size(str(value))


def ceph_from(data: dict[str, Any] | None, nodes: list[str]) -> Ceph | None:
    """The scenario's ``ceph:`` mapping, or None for a cluster without Ceph."""
    if not data:
        return None
    version = str(data.get("version", "19.2.3"))
    ceph = Ceph(fsid=str(data.get("fsid", "7c5e3b1a-2f44-4d8e-9b1a-5e0c1f2a3b4c")), version=version)
    for key in ("nearfull_ratio", "backfillfull_ratio", "full_ratio"):
        if key in data:
            setattr(ceph, key, float(data[key]))
    for i, od in enumerate(data.get("osds", [])):
        osd = Osd(
            id=int(od.get("id", i)),
            host=str(od["node"]),
            total=_size(od.get("size", "1T")),
            used=_size(od.get("used", 0)),
            up=bool(od.get("up", True)),
            in_=bool(od.get("in", True)),
            latency_ms=int(od.get("latency", 2)),
            device_class=str(od.get("class", "ssd")),
            version=str(od.get("version", version)),
        )
        if osd.host not in nodes:
            raise ValueError(f"osd.{osd.id} is on unknown node '{osd.host}'")
        ceph.osds[osd.id] = osd
    for i, pd in enumerate(data.get("pools", []), start=1):
        final = pd.get("pg_num_final")
        ceph.pools[pd["name"]] = Pool(
            id=int(pd.get("id", i)),
            name=str(pd["name"]),
            size=int(pd.get("size", 3)),
            min_size=int(pd.get("min_size", 2)),
            pg_num=int(pd.get("pg_num", 128)),
            stored=_size(pd.get("stored", 0)),
            autoscale_mode=str(pd.get("autoscale", "on")),
            pg_num_final=None if final is None else int(final),
            quota_max_bytes=_size(pd.get("quota", 0)),
            pg_num_min=None if pd.get("pg_num_min") is None else int(pd["pg_num_min"]),
            target_size=None if pd.get("target_size") is None else _size(pd["target_size"]),
            target_size_ratio=None if pd.get("target_size_ratio") is None else float(pd["target_size_ratio"]),
            application=str(pd.get("application") or _application(str(pd["name"]))),
        )
    for md in data.get("mons", [{"node": n} for n in nodes[:3]]):
        mon = Mon(
            name=str(md.get("name", md["node"])),
            host=str(md["node"]),
            up=bool(md.get("up", True)),
            avail_pct=int(md.get("avail_pct", 80)),
            version=str(md.get("version", version)),
        )
        (ceph.mons if md.get("in_monmap", True) else ceph.stale_mons)[mon.name] = mon
    for gd in data.get("mgrs", [{"node": m.host, "name": m.name, "up": m.up} for m in ceph.mons.values()]):
        up = bool(gd.get("up", True))
        ceph.mgrs.append(Daemon(str(gd.get("name", gd["node"])), str(gd["node"]), "up" if up else "down", version))
    for dd in data.get("mds", []):
        state = str(dd.get("state", "standby"))
        if state not in ("active", "standby", "stopped"):
            raise ValueError(f"mds state must be active, standby or stopped, not '{state}'")
        ceph.mds.append(Daemon(str(dd.get("name", dd["node"])), str(dd["node"]), state, version))
    ceph.installed = {str(n) for n in data.get("installed", nodes)}
    ceph.api_node = str(data.get("api_node", nodes[0] if nodes else ""))
    ceph.installed_versions = {str(n): str(v) for n, v in (data.get("installed_versions") or {}).items()}
    stray = sorted(set(ceph.installed_versions) - ceph.installed)
    if stray:
        raise ValueError(f"installed_versions for node(s) without Ceph installed: {stray}")
    daemons = {o.host for o in ceph.osds.values()} | {m.host for m in ceph.mons.values()}
    missing = sorted(daemons - ceph.installed)
    if missing:
        raise ValueError(f"Ceph daemons on node(s) without Ceph installed: {missing}")
    unknown = set(data.get("flags", [])) - set(FLAGS)
    if unknown:
        raise ValueError(f"unknown ceph flag(s) {sorted(unknown)} (known: {', '.join(FLAGS)})")
    ceph.flags = set(data.get("flags", []))
    ceph.config = {str(k): dict(v or {}) for k, v in (data.get("config") or {}).items()}
    ceph.inited = bool(data.get("initialized", True))
    ceph.configdb = [
        {"section": str(e.get("section", "global")), "name": str(e["name"]), "value": str(e["value"])}
        for e in data.get("configdb")
        or [{"section": "mon", "name": "auth_allow_insecure_global_id_reclaim", "value": "false"}]
    ]
    for name, cd in (data.get("health_checks") or {}).items():
        ceph.extra_checks[str(name)] = {
            "severity": str(cd.get("severity", "HEALTH_WARN")),
            "summary": {"message": str(cd.get("message", name)), "count": int(cd.get("count", 1))},
            "detail": [],
            "muted": False,
        }
    return ceph


def release_name(version: str) -> str:
    return RELEASES.get(version.split(".", maxsplit=1)[0], "unknown")
