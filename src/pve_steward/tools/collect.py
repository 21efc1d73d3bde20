"""Fill a :class:`ClusterData` for the diagnostics, with every read concurrent and bounded.

Cluster-wide reads come first; then branches that depend only on them run side by side (per node
and per guest, then what their answers ask for; the checks' declared reads; Ceph; PBS), so no
branch's last round waits for another's. Offline nodes are not queried; what could not be read is recorded in
``missing`` with the areas it affects, so reports say what they could not check. A 403 on a
read that needs more than auditor rights (pending updates need Sys.Modify) is recorded as an
optional gap (CHECK_SKIPPED), not as a failure.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Any

import anyio

from pve_steward.analysis.catalog import Need, needs_of
from pve_steward.analysis.data import ClusterData, Missing
from pve_steward.analysis.health import AREAS as HEALTH_AREAS
from pve_steward.analysis.health import ON_DEMAND
from pve_steward.analysis.vzdumptarget import job_enabled
from pve_steward.errors import PveError, PveNotFound, PvePermissionError
from pve_steward.pve.guestconfig import parse_property_string
from pve_steward.pve.storagecfg import allowed_nodes, is_shared
from pve_steward.pve.tasks import task_running
from pve_steward.pve.visibility import (
    BACKUP_JOBS,
    CLUSTER_STATUS,
    GUESTS,
    HA,
    NODE_FIGURES,
    NODE_TASKS,
    NOT_BACKED_UP,
    REPLICATION,
    STORAGE,
    Filter,
    mapping_filter,
)
from pve_steward.pve.volumeaccess import backups_hidden
from pve_steward.pveio.client import ApiPath, ProxmoxClient, api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import storage as storage_seg
from pve_steward.pveio.client import upid as upid_seg
from pve_steward.pveio.client import vmid as vmid_seg
from pve_steward.pveio.readcache import Key, read_key
from pve_steward.tools.agentread import read_agent_details
from pve_steward.tools.cephread import read_ceph
from pve_steward.tools.pbsread import PbsLink, not_configured, read_pbs
from pve_steward.tools.privileges import hidden_references, learn, probe_paths, unsettled, visibility_from
from pve_steward.tools.sdnread import read_fabric_neighbors, read_vnet_subnets, read_zone_content

# the storage PVE names when it refuses a node's vzdump default (VZDump.pm storage_info, Storage.pm storage_config)
_REFUSED_STORAGE = re.compile(r"(?:can't use storage '([^']+)' for backups|storage '([^']+)' does not exist)")

ALL_AREAS = (*HEALTH_AREAS, *ON_DEMAND)
NEEDS_CONFIGS = {"backups", "migration", "capacity", "guests", "upgrade"}
NEEDS_TASKS = {"backups", "guests", "operations"}
# What PVE checks before it answers a node's reads (each method's `permissions`: pve-manager PVE/API2/Nodes.pm
# status, Disks/List.pm, Disks/ZFS.pm, APT.pm update_database's GET and repositories); a 403 on one is this
# token's scope, said with the privilege that would show it (CHECK_SKIPPED), never a failed read. Disks' is
# an "or" check, so PVE's own 403 names no path or privilege.
NODE_READ_PRIVILEGE = {
    "node_status": "Sys.Audit on /nodes/{node}",
    "disks": "Sys.Audit on / or on /nodes/{node}",
    "zfs": "Sys.Audit on /",
    "updates": "Sys.Modify on /nodes/{node}",
    "repositories": "Sys.Audit on /nodes/{node}",
}
# not a check area: what the age of each guest's newest backup stands on (the backup jobs and the backup storages'
# contents, gaps recorded for "backups"), without the task history the backups checks read (the evacuation plan's
# readiness, analysis/planner/readiness.py)
BACKUP_AGE = "backup_age"

Read = tuple[str, ApiPath, dict[str, Any]]

# where a branch of the collection (Collector._branches) records its gaps; None: straight into the data
_GAPS: ContextVar[list[Missing] | None] = ContextVar("collector_gaps", default=None)


def _laid_out(configs: dict[int, Any]) -> dict[int, Any]:
    """A copy of each config, made together in vmid order: the order every guest check walks them.

    Decoded on the request pool's threads between other allocations, 10,000 config dicts lie scattered
    in memory, and some twenty checks look keys up in each of them. Copied in one loop they lie together:
    about 2 ms here made the analysis 20 ms faster at 10,000 guests (design record 261205-44). The values
    are the answers' own (read-only, as the read cache hands them out).
    """
    return {vmid: dict(configs[vmid]) for vmid in sorted(configs)}


# the first wave's lists PVE shortens per object, and the areas that judge their rows (Collector._partial_lists)
_PARTIAL = (
    (GUESTS, "/cluster/resources", ("backups", "migration", "capacity", "guests", "ha", "replication", "upgrade")),
    (STORAGE, "/storage", ("backups", "storage", "capacity", "migration", "upgrade", "pbs")),
)
# the filter of each first-wave list (pve/visibility.py): a 403 there is a list hidden from this token, said as such
_FILTERS: dict[str, Filter] = {
    "status": CLUSTER_STATUS,
    "storage": STORAGE,
    "ha_status": HA,
    "ha_resources": HA,
    "ha_groups": HA,
    "ha_rules": HA,
    "backup_jobs": BACKUP_JOBS,
    "not_backed_up": NOT_BACKED_UP,
    "replication_jobs": REPLICATION,
}


class Collector:
    def __init__(self, client: ProxmoxClient, now: float, areas: Iterable[str], pbs: PbsLink | None = None) -> None:
        self.client = client
        self.pbs = pbs
        self.areas = set(areas)
        self.data = ClusterData(now=now)
        self._answers: dict[Key, Any] = {}  # every answer of this check, by what was read (see _read)
        self._reading: dict[Key, anyio.Event] = {}  # reads another branch has in flight (see _read)
        self._permissions: Any = None  # this token's own /access/permissions (backups: is a content list whole?)

    @property
    def _gaps(self) -> list[Missing]:
        """The list this branch's gaps go to (the data's own outside :meth:`_branches`)."""
        sink = _GAPS.get()
        return self.data.missing if sink is None else sink

    def _miss(self, what: str, key: str, err: PveError, node: str | None, affects: Iterable[str]) -> None:
        privilege = NODE_READ_PRIVILEGE.get(key.split(":", 1)[0]) if isinstance(err, PvePermissionError) else None
        refused = privilege is not None
        if privilege is not None:
            what += f" (not visible to this token: PVE answers it only with {privilege.replace('{node}', node or '')})"
        self._gaps.append(
            Missing(
                what=what,
                path=err.path or key,
                error=err.message,
                node=node,
                status=err.status,
                affects=tuple(affects),
                # a scope limit, not a failed read; hidden: a plan standing on it (a node's status) is incomplete
                optional=refused,
                hidden=refused,
            )
        )

    async def _read(self, reads: list[Read]) -> dict[str, Any]:
        """Each (path, parameters) is read once per check, however many areas ask for it.

        The read cache's TTL is seconds, but a check of a large cluster runs longer, so two areas
        reading one endpoint minutes apart went to PVE twice (issue 17). A repeat gets a copy of
        the first answer (or the same error), so no area's analysis sees another's changes.
        The first is the read cache's shared answer (``read_only``): nothing on the heavy paths
        changes an answer in place (tests/integration/test_shared_reads.py checks it).
        """
        fresh: dict[Key, Read] = {}
        for key, path, params in reads:
            fresh.setdefault(read_key(path, params), (key, path, params))
        # another branch reading the same thing: wait for its answer instead of asking PVE again
        elsewhere = {self._reading[k] for k in fresh if k in self._reading}
        fresh = {k: r for k, r in fresh.items() if k not in self._answers and k not in self._reading}
        done = anyio.Event()
        self._reading.update(dict.fromkeys(fresh, done))
        try:
            got = await gather(self.client, fresh.values(), read_only=True)
            for what, (key, _path, _params) in fresh.items():
                self._answers[what] = got[key]
        finally:
            for what in fresh:
                del self._reading[what]
            done.set()
        for event in elsewhere:
            await event.wait()
        first = {r[0] for r in fresh.values()}
        out: dict[str, Any] = {}
        for key, path, params in reads:
            answer = self._answers[read_key(path, params)]
            out[key] = answer if key in first or isinstance(answer, PveError) else copy.deepcopy(answer)
            first.discard(key)
        return out

    def _want(self, *areas: str) -> bool:
        return bool(self.areas & set(areas))

    async def run(
        self,
        *,
        vmids: list[int] | None = None,
        node: str | None = None,
        preconditions: bool = False,
        agent_probe_limit: int = 0,
        pending_probe_limit: int | None = None,
    ) -> ClusterData:
        """``vmids``/``node`` restrict per-guest reads (configs, preconditions) to those guests.

        ``preconditions``: a migration question. PVE's migrate preconditions are read too, and the configs
        as PVE's migration reads them (current, without pending changes); otherwise with pending applied."""
        d = self.data
        wave1: list[Read] = [
            ("status", api_path("cluster", "status"), {}),
            ("resources", api_path("cluster", "resources"), {}),
            ("version", api_path("version"), {}),
            ("storage", api_path("storage"), {}),
        ]
        if self._want("ha", "migration"):
            wave1.append(("ha_status", api_path("cluster", "ha", "status", "current"), {}))
        if self._want("ha", "migration", "guests"):  # guests: start-all skips HA resources (GUEST_NO_ONBOOT)
            wave1.append(("ha_resources", api_path("cluster", "ha", "resources"), {}))
        # pbs: vzdump's prune of PBS storages (PBS_PRUNE_DROPS_LAST_VERIFIED); storage: where jobs without storage write
        if self._want("backups", "pbs", "storage", BACKUP_AGE):
            wave1.append(("backup_jobs", api_path("cluster", "backup"), {}))
        if self._want("backups", BACKUP_AGE):
            wave1.append(("not_backed_up", api_path("cluster", "backup-info", "not-backed-up"), {}))
        # what PVE's filtered lists hide from this token (pve/visibility.py); the storages' content lists too
        # (pve/volumeaccess.py). The ACL tree tells an object hidden by its own NoAccess entry.
        wave1 += [("permissions", api_path("access", "permissions"), {}), ("acl", api_path("access", "acl"), {})]
        if self._want("replication", "migration"):
            wave1.append(("replication_jobs", api_path("cluster", "replication"), {}))
        if self._want("migration"):  # mapped devices: which nodes have each mapping (Mapping.Audit filters rows)
            wave1 += [(f"mapping:{kind}", api_path("cluster", "mapping", kind), {}) for kind in ("pci", "usb", "dir")]
        got = await self._read(wave1)
        self._permissions = got.pop("permissions")
        d.visibility, gaps = visibility_from(self._permissions, got.pop("acl"))
        self._gaps.extend(dataclasses.replace(g, affects=tuple(sorted(self.areas))) for g in gaps)
        for key in [k for k in got if k.startswith("mapping:")]:
            value = got.pop(key)
            if not isinstance(value, PveError):
                d.mappings[key.split(":", 1)[1]] = value
            elif isinstance(value, PvePermissionError):
                d.unread[key] = value.message
                self._hidden(mapping_filter(key.split(":", 1)[1]), ("migration",), value.path or key)
            elif not isinstance(value, PveNotFound):  # a release without this mapping kind has nothing to read
                # unreadable: guests with mapped devices stay "not provable"; said once, as a skipped check
                self._gaps.append(
                    Missing(
                        what=f"{key.split(':', 1)[1]} device mappings (guests using them stay not provable)",
                        path=value.path or key,
                        error=value.message,
                        status=value.status,
                        affects=("migration",),
                        optional=True,
                    )
                )
        fields = {
            "status": "cluster_status",
            "resources": "resources",
            "version": "version",
            "storage": "storage_config",
            "ha_status": "ha_status",
            "ha_resources": "ha_resources",
            "backup_jobs": "backup_jobs",
            "not_backed_up": "not_backed_up",
            "replication_jobs": "replication_jobs",
        }
        for key, value in got.items():
            if isinstance(value, PveError):
                d.unread[key] = value.message
                affects = ALL_AREAS if key in ("resources", "status") else self._affects(key)
                if isinstance(value, PvePermissionError) and key in _FILTERS:
                    f = _FILTERS[key]
                    self._hidden(f, affects, f.listing if f is HA else value.path or key)
                else:
                    self._miss(f"cluster data ({key})", key, value, None, affects)
            else:
                setattr(d, fields[key], value)
        if isinstance(got["resources"], PveError):
            raise got["resources"]
        self._partial_lists()
        wanted: set[int] | None = set(vmids) if vmids is not None else None
        if node is not None:
            on_node = {v for v, g in d.guests.items() if g.get("node") == node}
            wanted = on_node if wanted is None else wanted & on_node
        # what depends only on wave 1 runs side by side: a branch's last round no longer waits for
        # another's (one round trip each at the end of a check, issue 17); gaps keep this order
        steps: list[Callable[[], Awaitable[None]]] = [
            lambda: self._guest_reads(wanted, preconditions, agent_probe_limit, pending_probe_limit),
            self._declared_branch,
        ]
        if self._want("ceph", "upgrade"):  # only where Ceph answers; a cluster without Ceph gets no Ceph reads
            steps.append(self._ceph_branch)
        if self._want("pbs", "backups"):  # backups: retention on PBS storages consults PBS prune jobs
            steps.append(self._pbs)
        await self._branches(steps)
        await self._settle_references()
        return d

    def _hidden(self, f: Filter, affects: Iterable[str], path: str, ident: object = None) -> None:
        """A list (or one object) PVE does not show this token: a check limited by its scope, said with what is
        hidden and which privilege would show it (CHECK_SKIPPED), never read as an empty cluster."""
        self._gaps.append(Missing.not_visible(f, path, affects, ident, status=403))

    def _short(self, f: Filter, path: str, affects: Iterable[str], what: str = "") -> None:
        """A list that shows this token only some of its rows, or may (it cannot be told): said once. With the
        token's own privileges unread it is a failed read (DATA_INCOMPLETE), not a limit of its scope."""
        gap = Missing.not_visible(f, path, affects, what=what)
        if self.data.visibility.whole(f) is None:
            gap = dataclasses.replace(gap, error=f"{gap.error}; cannot tell: {unsettled(self.data.visibility)}")
        if self.data.visibility.unread_reason is not None:
            gap = dataclasses.replace(gap, optional=False)
        self._gaps.append(gap)

    def _partial_lists(self) -> None:
        """The first wave's lists that PVE shortened for this token (or may have: own privileges unread): one
        skipped-check note each, so no report passes the hidden rows for a clean bill."""
        d = self.data
        for f, path, affects in _PARTIAL:
            if d.visibility.whole(f) is not True and not (f is STORAGE and "storage" in d.unread):
                self._short(f, path, affects)
        blind = [n for n in d.nodes if d.visibility.sees(NODE_FIGURES, n) is not True]
        if blind:
            self._short(
                NODE_FIGURES,
                "/cluster/resources#nodes",
                ("capacity", "cluster", "migration", "node"),
                what=f"memory, CPU and disk figures of node(s) {', '.join(sorted(blind))}",
            )

    async def _settle_references(self) -> None:
        """Ask, path by path, about the objects checks name that a filtered list left out and the privilege
        map cannot settle (tools/privileges.py): each is then absent, or hidden from this token."""
        paths, gaps = probe_paths(self.data)
        self._gaps.extend(dataclasses.replace(g, affects=tuple(sorted(self.areas))) for g in gaps)
        await self._settle(paths)
        self._gaps.extend(hidden_references(self.data))

    async def _settle(self, paths: list[str]) -> None:
        if not paths:
            return
        got = await self._read([(p, api_path("access", "permissions"), {"path": p}) for p in paths])
        for path, answer in got.items():
            learn(self.data, path, answer)  # unanswered: it stays "cannot tell"

    async def _branches(self, steps: list[Callable[[], Awaitable[None]]]) -> None:
        """Run the steps concurrently; each records its gaps apart, appended in the steps' order so a
        report does not depend on which answer came first."""
        sinks: list[list[Missing]] = [[] for _ in steps]

        async def branch(step: Callable[[], Awaitable[None]], sink: list[Missing]) -> None:
            _GAPS.set(sink)  # this task's own context: the other branches keep theirs
            await step()

        async with anyio.create_task_group() as tg:
            for step, sink in zip(steps, sinks, strict=True):
                tg.start_soon(branch, step, sink)
        for sink in sinks:
            self.data.missing += sink

    async def _guest_reads(
        self, wanted: set[int] | None, preconditions: bool, agent_probe_limit: int, pending_probe_limit: int | None
    ) -> None:
        """Per node and per guest (wave 2), then what their answers ask for (snapshots, wave 3, agents)."""
        await self._wave2(wanted, preconditions)
        if preconditions or self._want("upgrade"):  # pve8to9 check_storage_content walks the snapshots too
            await self._snapshot_sections(wanted)
        await self._wave3(agent_probe_limit, pending_probe_limit)
        if self._want("guests") and self.data.agent:  # filesystems and addresses of the VMs whose agent answered
            self._gaps.extend(await read_agent_details(self.client, self.data))

    async def _declared_branch(self) -> None:
        await self._declared_reads()
        if self._want("sdn"):  # PVE 9 fabric neighbours: per fabric, so not a declared read; subnets: per vnet
            self._gaps.extend(await read_fabric_neighbors(self.client, self.data))
            self._gaps.extend(await read_vnet_subnets(self.client, self.data))
        if self._want("migration"):  # the vnets' own status where a zone is in 'error': per zone and node
            self._gaps.extend(await read_zone_content(self.client, self.data))

    async def _ceph_branch(self) -> None:
        d = self.data
        d.ceph, gaps = await read_ceph(self.client, d.online_nodes)
        ceph_areas = tuple(a for a in ("ceph", "upgrade") if a in self.areas)
        self._gaps.extend([dataclasses.replace(g, affects=ceph_areas) for g in gaps])
        if d.ceph is not None and self._want("upgrade") and d.online_nodes:
            await self._ceph_config(d.ceph.node or d.online_nodes[0])  # raw config needs Ceph on that node

    async def _pbs(self) -> None:
        if self.pbs is None:
            if self._want("pbs"):
                self._gaps.append(not_configured())
            return
        self.data.pbs, gaps = await read_pbs(self.pbs, self.data.storage_config, self.data.now)
        self._gaps.extend(gaps)

    async def _declared_reads(self) -> None:
        """The reads the chosen areas' checks declare (analysis/catalog.py ``Need``): each key once,
        per-node ones on every online node, all in one bounded wave; reads over another read's rows
        (``each``) in a second wave."""
        needs = needs_of(self.areas)
        if not needs:
            return
        needs = await self._visible_needs(needs)
        for second in (False, True):
            reads: list[Read] = []
            for key, (need, areas) in needs.items():
                if (need.each is not None) == second:
                    reads += self._declared_read_list(key, need, areas)
            got = await self._read(reads) if reads else {}
            for slot, value in got.items():
                key, _, where = slot.partition("@")
                node, _, item = where.partition("#")
                need, areas = needs[key]
                if isinstance(value, PveError):
                    if not (need.absent_ok and (isinstance(value, PveNotFound) or value.status == 501)):
                        self._miss_declared(need, areas, value, node or None)
                elif need.each is None:
                    self.data.reads.setdefault(key, {})[node] = value
                else:
                    self.data.reads.setdefault(key, {}).setdefault(node, {})[item] = value

    def _declared_read_list(self, key: str, need: Need, areas: tuple[str, ...]) -> list[Read]:
        params = dict(need.params)
        if need.per == "cluster":
            return [(f"{key}@", self._need_path(need, "", ""), params)]
        if need.each is None:
            return [(f"{key}@{n}", self._need_path(need, n, ""), params) for n in self.data.online_nodes]
        reads: list[Read] = []
        parent, field_ = need.each
        for n in self.data.online_nodes:
            rows = self.data.read(parent, n) or []
            items = sorted({str(r[field_]) for r in rows if isinstance(r, dict) and r.get(field_)})
            if len(items) > need.limit:
                self._gap(
                    need,
                    n,
                    f"{len(items) - need.limit} of {len(items)} not read (at most {need.limit} per node)",
                    areas,
                )
            for item in items[: need.limit]:
                try:
                    where = self._need_path(need, n, item if "{item}" in need.path else "")
                except ValueError:  # a name PVE's API cannot address either (cluster text): said, not read
                    self._gap(need, n, f"{item!r} is not an addressable name", areas)
                    continue
                reads.append((f"{key}@{n}#{item}", where, {k: item if v == "{item}" else v for k, v in params.items()}))
        return reads

    @staticmethod
    def _need_path(need: Need, node: str, item: str) -> ApiPath:
        segs = {"{node}": node_seg(node) if node else None, "{item}": storage_seg(item, "item") if item else None}
        return api_path(*(segs.get(seg) or seg for seg in need.path.strip("/").split("/")))

    def _gap(self, need: Need, node: str, why: str, areas: tuple[str, ...]) -> None:
        """A read over rows left out on purpose (the per-node bound, a name PVE cannot address): CHECK_SKIPPED."""
        self._gaps.append(
            Missing(
                what=f"{need.key.replace('_', ' ')} of {node}: {why}",
                path=need.path,
                error=why,
                node=node,
                affects=areas,
                optional=True,
            )
        )

    async def _ceph_config(self, node: str) -> None:
        """Upgrade readiness: /etc/pve/ceph.conf (one file for the cluster), only where Ceph answered."""
        path = api_path("nodes", node_seg(node), "ceph", "cfg", "raw")
        value = (await self._read([("ceph_config", path, {})]))["ceph_config"]
        if isinstance(value, PveError):
            self._miss("Ceph configuration", "ceph_config", value, node, ("upgrade",))
        else:
            self.data.reads.setdefault("ceph_config", {})[""] = value

    async def _visible_needs(
        self, needs: dict[str, tuple[Need, tuple[str, ...]]]
    ) -> dict[str, tuple[Need, tuple[str, ...]]]:
        """Drop the reads whose filtered lists (``Need.filters``) would show this token only part of their rows,
        or may (it cannot be told), each recorded as a skipped check naming what is hidden and the privilege
        that would show it: a partial list never passes for a clean one (pve/visibility.py)."""
        keep: dict[str, tuple[Need, tuple[str, ...]]] = {}
        for key, (need, areas) in needs.items():
            short = [f for f in need.filters if self.data.visibility.whole(f) is not True]
            if not short:
                keep[key] = (need, areas)
                continue
            f, what = short[0], key.replace("_", " ")
            self._short(f, need.path, areas, what=what if f.listing == need.path else f"{what} (counted over {f.rows})")
        return keep

    def _miss_declared(
        self, need: Need, areas: tuple[str, ...], err: PveError, node: str | None, what: str = ""
    ) -> None:
        denied = isinstance(err, PvePermissionError)
        privilege = need.privilege.replace("{node}", node or "")
        self._gaps.append(
            Missing(
                what=(what or need.key.replace("_", " "))
                + (f" of {node}" if node else "")
                + (f" (skipped: needs {privilege})" if denied else ""),
                path=err.path or need.path,
                error=err.message,
                node=node,
                status=err.status,
                affects=areas,
                optional=denied,
            )
        )

    async def _snapshot_sections(self, wanted: set[int] | None) -> None:
        """Migration and upgrade: what the snapshots of each guest with a snapshot (``parent``) reference (their
        config sections). PVE checks those volumes as it checks the config's, even on a guest whose own volumes
        are all shared (QemuServer.pm foreach_volid, LXC Migrate.pm phase1): a local ISO a snapshot still holds
        blocks the move; pve8to9 checks their storages' content types. A failed read leaves the references
        unknown (the verdict says "not provable"; the upgrade report names the gap)."""
        d = self.data
        guests = [
            v
            for v, cfg in sorted(d.parsed.items())
            if (wanted is None or v in wanted) and cfg.parent_snapshot and v in d.guests
        ]
        where = {v: (node_seg(d.guests[v]["node"]), d.guests[v]["type"], vmid_seg(v)) for v in guests}
        lists = await self._read([(f"{v}", api_path("nodes", *where[v], "snapshot"), {}) for v in guests])
        reads: list[Read] = []
        for key, rows in lists.items():
            if not isinstance(rows, PveError):
                names = [str(r["name"]) for r in rows if r.get("name") and r.get("name") != "current"]
                reads += [(f"{key}:{n}", api_path("nodes", *where[int(key)], "config"), {"snapshot": n}) for n in names]
                d.snapshot_configs[int(key)] = {}
        got = await self._read(reads)
        failed = [value for value in lists.values() if isinstance(value, PveError)]
        for key, value in got.items():
            vmid, name = key.split(":", 1)
            if isinstance(value, PveError):
                d.snapshot_configs.pop(int(vmid), None)
                failed.append(value)
            elif int(vmid) in d.snapshot_configs:
                d.snapshot_configs[int(vmid)][name] = value
        if failed and self._want("upgrade"):  # a migration verdict says "not provable" by itself
            # a snapshot list needs VM.Audit, as the config read that found the snapshot did: no optional gap
            self._miss(f"snapshot sections ({len(failed)} read(s) failed)", "snapshots", failed[0], None, ("upgrade",))

    @staticmethod
    def _affects(key: str) -> tuple[str, ...]:
        return {
            "ha_status": ("ha", "migration"),
            "ha_resources": ("ha", "migration", "guests"),
            "ha_groups": ("ha",),
            "ha_rules": ("ha",),
            "backup_jobs": ("backups", "pbs"),
            "not_backed_up": ("backups",),
            "replication_jobs": ("replication", "migration"),
            "storage": ALL_AREAS,
            "version": (),
        }.get(key, ALL_AREAS)

    def _tasks_visible(self, node: str) -> bool:
        """A node's task list shows every task only with Sys.Audit on the node, else only this token's own
        (pve-manager PVE/API2/Tasks.pm node_tasks): such a list is not read, and its node's tasks count as
        unread (a lock is not 'stuck' for want of a task this token cannot see)."""
        if self.data.sees(NODE_TASKS, node) is True:
            return True
        self.data.unread[f"tasks:{node}"] = "not visible to this token"
        self._hidden(NODE_TASKS, tuple(NEEDS_TASKS), f"/nodes/{node}/tasks", node)
        return False

    async def _wave2(self, wanted: set[int] | None, preconditions: bool) -> None:
        d = self.data
        if self.areas & NEEDS_TASKS:
            await self._settle(d.visibility.undecided(NODE_TASKS, d.online_nodes))
        online, offline = d.online_nodes, sorted(set(d.nodes) - set(d.online_nodes))
        for node in offline:
            self._gaps.append(
                Missing(
                    what=f"everything on offline node {node}",
                    path=f"/nodes/{node}",
                    error="node is offline",
                    node=node,
                    affects=ALL_AREAS,
                )
            )
        reads: list[Read] = []
        since = int(d.now - 48 * 3600)
        for n in online:
            seg = node_seg(n)
            if self._want("cluster", "capacity", "migration"):
                reads.append((f"node_status:{n}", api_path("nodes", seg, "status"), {}))
            if self._want("capacity"):
                reads.append((f"node_storage:{n}", api_path("nodes", seg, "storage"), {}))
            if self.areas & NEEDS_TASKS and self._tasks_visible(n):
                reads.append(
                    (f"tasks:{n}", api_path("nodes", seg, "tasks"), {"since": since, "limit": 5000, "source": "all"})
                )
            if self._want("replication"):
                reads.append((f"replication:{n}", api_path("nodes", seg, "replication"), {}))
            if self._want("operations"):
                reads += [
                    (f"certificates:{n}", api_path("nodes", seg, "certificates", "info"), {}),
                    (f"updates:{n}", api_path("nodes", seg, "apt", "update"), {}),
                    (f"repositories:{n}", api_path("nodes", seg, "apt", "repositories"), {}),
                    (f"subscription:{n}", api_path("nodes", seg, "subscription"), {}),
                    (f"disks:{n}", api_path("nodes", seg, "disks", "list"), {}),
                    (f"zfs:{n}", api_path("nodes", seg, "disks", "zfs"), {}),
                ]
        # the few cluster-wide and per-storage reads go ahead of the thousands per guest: the pool takes reads
        # in order, so a lone one asked last was the whole last round trip of a check (issue 17)
        if self._want("ha", "migration"):  # migration: a migrate of an HA guest meets its HA rules
            reads += self._ha_constraint_reads()
        if self._want("backups", BACKUP_AGE):
            reads += self._backup_content_reads(online)
        if self._want("backups", "pbs", "storage"):
            reads += self._vzdump_defaults_reads(online)
        # a migration question (preconditions) is judged on the current config, as PVE's migration loads it
        # (load_config; the config API applies pending changes unless current=1): a device or CPU type pending
        # until the next start does not decide where the guest can go today
        params: dict[str, Any] = {"current": 1} if preconditions else {}
        for vmid, g in d.guests.items():
            if g.get("node") not in online or (wanted is not None and vmid not in wanted):
                continue
            at, kind = node_seg(g["node"]), g["type"]
            if self.areas & NEEDS_CONFIGS:
                reads.append((f"config:{vmid}", api_path("nodes", at, kind, vmid_seg(vmid), "config"), params))
            if preconditions and kind == "qemu":
                # each guest's precondition beside its config: PVE runs the config in pveproxy and the
                # precondition in pvedaemon (protected), so the node's two pools work side by side instead
                # of one after the other (design record 261206-61)
                reads.append((f"precondition:{vmid}", api_path("nodes", at, "qemu", vmid_seg(vmid), "migrate"), {}))
        got = await self._read(reads)
        self._take_preconditions(got)
        self._take_ha_constraints(got)
        targets: dict[str, dict[str, Any]] = {
            "node_status": d.node_status,
            "node_storage": d.node_storage,
            "replication": d.replication_state,
            "certificates": d.certificates,
            "updates": d.updates,
            "repositories": d.repositories,
            "subscription": d.subscriptions,
            "disks": d.disks,
            "zfs": d.zfs,
        }
        affects = {
            "node_status": ("cluster", "capacity", "migration"),
            "node_storage": ("capacity",),
            "tasks": tuple(NEEDS_TASKS),
            "replication": ("replication",),
            "config": tuple(NEEDS_CONFIGS),
            "content": ("backups",),
            "vzdump": ("backups", "pbs", "storage"),
        }
        configs: dict[int, Any] = {}
        for key, value in sorted(got.items()):
            kind, _, ident = key.partition(":")
            if kind == "vzdump" and ident.endswith("@"):
                self._take_vzdump_default(ident[:-1], value)
                continue
            if (
                kind == "vzdump"
                and isinstance(value, PvePermissionError)
                and ident.split("@", 1)[1] not in d.storage_defs
            ):
                continue  # a job's storage PVE hides from this token: said once, as not visible (tools/privileges.py)
            if isinstance(value, PveError):
                if kind in ("tasks", "node_storage", "node_status"):
                    d.unread[key] = value.message
                where = ident if kind not in ("config", "content", "vzdump") else None
                self._miss(
                    f"{kind.replace('_', ' ')} of {ident}", key, value, where, affects.get(kind, ("operations",))
                )
                continue
            if kind == "tasks":
                d.tasks.extend(dict(r, node=r.get("node", ident)) for r in value)
            elif kind == "config":
                configs[int(ident)] = value
            elif kind == "vzdump":
                d.vzdump_defaults[ident] = value
            elif kind == "content":
                sid = ident.split("@", 1)[0]
                d.backups.extend(dict(r, storage=sid) for r in value if r.get("content", "backup") == "backup")
                if sid not in d.backup_storages_read:
                    d.backup_storages_read.append(sid)
            else:
                targets[kind][ident] = value
        d.configs.update(_laid_out(configs))

    def _backup_content_reads(self, online: list[str]) -> list[Read]:
        reads: list[Read] = []
        for s in self.data.storage_config:
            if "backup" not in str(s.get("content", "")).split(",") or int(s.get("disable", 0) or 0):
                continue
            sid = str(s["storage"])
            nodes = [n for n in online if not s.get("nodes") or n in str(s["nodes"]).split(",")]
            if nodes and not self._backups_visible(sid, nodes[0]):
                continue
            shared = is_shared(s)
            for n in nodes[:1] if shared else nodes:
                reads.append(
                    (
                        f"content:{sid}@{n}",
                        api_path("nodes", node_seg(n), "storage", storage_seg(sid), "content"),
                        {"content": "backup"},
                    )
                )
        return reads

    def _backups_visible(self, sid: str, node: str) -> bool:
        """Whether PVE lists every backup of the storage to this token; if not, a skipped check says so and
        the storage counts as unread (its guests' backup age is not judged, never called missing)."""
        perms = self._permissions
        why = backups_hidden(perms if perms is not None else {}, sid)
        if why is None:
            return True
        self._gaps.append(
            Missing(
                what=f"backup contents of {sid} (skipped: the list would be partial)",
                path=f"/nodes/{node}/storage/{sid}/content",
                error=why,
                affects=("backups",),
                optional=not isinstance(perms, PveError),
            )
        )
        return False

    def _pve_major(self) -> int | None:
        version = str((self.data.version or {}).get("version") or "")
        head = version.split(".", 1)[0]
        return int(head) if head.isdecimal() else None

    def _ha_constraint_reads(self) -> list[Read]:
        """PVE 9 keeps placement in HA rules (its rules index also shows groups not yet migrated) and answers
        500 on the groups index once they are migrated; PVE 8 has only groups (pve-ha-manager
        API2/HA/Groups.pm index, API2/HA/Rules.pm index). Unknown version: read both."""
        major = self._pve_major()
        reads: list[Read] = []
        if major is None or major >= 9:
            reads.append(("ha_rules", api_path("cluster", "ha", "rules"), {}))
        if major is None or major < 9:
            reads.append(("ha_groups", api_path("cluster", "ha", "groups"), {}))
        return reads

    def _take_ha_constraints(self, got: dict[str, Any]) -> None:
        for key, name in (("ha_rules", "HA rules"), ("ha_groups", "HA groups")):
            if key not in got:
                continue
            value = got.pop(key)
            if not isinstance(value, PveError):
                setattr(self.data, key, value)
            elif key == "ha_rules" and isinstance(value, PveNotFound):
                continue  # PVE 8: no rules endpoint
            elif key == "ha_groups" and "migrated to rules" in value.message:
                continue  # PVE 9 after the migration: the rules hold them
            elif isinstance(value, PvePermissionError):
                self.data.unread[key] = value.message
                if not any(g.path == "/cluster/ha" for g in (*self.data.missing, *self._gaps)):  # once for all HA lists
                    self._hidden(HA, ("ha", "migration"), "/cluster/ha")
            else:
                self._miss(f"cluster data ({name})", key, value, None, ("ha",))

    def _vzdump_defaults_reads(self, online: list[str]) -> list[Read]:
        """What vzdump would use on each node an enabled job runs on. For a job without storage (or dumpdir):
        ``GET /nodes/{n}/vzdump/defaults`` names the node's default storage (/etc/vzdump.conf's, else 'local') and
        folds its prune-backups in. For a job whose retention is not fully set on the job itself:
        ``...?storage=`` folds the storage's prune-backups, /etc/vzdump.conf and the schema default (keep-all) as
        PVE/VZDump.pm does, for PBS storages alike (for the pbs area alone, only jobs writing to PBS storages)."""
        kinds = {str(s.get("storage")): s for s in self.data.storage_config}
        pairs: set[tuple[str, str]] = set()
        for job in self.data.backup_jobs:
            nodes = [n for n in ([job["node"]] if job.get("node") else online) if n in online]
            if not job_enabled(job):
                continue
            if not job.get("storage"):  # a dumpdir job too: the answer holds vzdump.conf's compress
                pairs.update((n, "") for n in nodes)
                continue
            sid = str(job["storage"])
            cfg = kinds.get(sid, {})
            if not self._want("backups") and not (self._want("pbs") and cfg.get("type") == "pbs"):
                continue  # retention: backups judge it, pbs on PBS storages; the storage area needs none
            if job.get("prune-backups") and job.get("remove") is not None:
                continue
            allowed = allowed_nodes(cfg)
            pairs.update((n, sid) for n in nodes if allowed is None or n in allowed)
        return [
            (
                f"vzdump:{n}@{sid}",
                api_path("nodes", node_seg(n), "vzdump", "defaults"),
                {"storage": sid} if sid else {},
            )
            for n, sid in sorted(pairs)
        ]

    def _take_vzdump_default(self, node: str, value: Any) -> None:
        """A node's own vzdump default (the read without storage): its storage, or PVE's refusal of it. vzdump
        refuses a job the same way (VZDump.pm storage_info: "can't use storage 'X' for backups - wrong content
        type"; storage_config: "storage 'X' does not exist"), so the storage a refusal names is where such a job
        writes; the retention the refusal hides is still a gap."""
        if not isinstance(value, PveError):
            if value.get("storage"):
                self.data.vzdump_storage[node] = str(value["storage"])
            self.data.vzdump_defaults[f"{node}@"] = value
            return
        refused = _REFUSED_STORAGE.search(value.message)
        if refused:
            self.data.vzdump_storage[node] = refused.group(1) or refused.group(2)
        affects = ("backups", "pbs") if refused else ("backups", "pbs", "storage")
        self._miss(f"vzdump defaults of {node}", f"vzdump:{node}@", value, None, affects)

    def _take_preconditions(self, got: dict[str, Any]) -> None:
        """Move precondition answers out of a wave's results; 403s become one optional gap."""
        denied = 0
        unread: list[PveError] = []
        for key in [k for k in got if k.startswith("precondition:")]:
            value = got.pop(key)
            if isinstance(value, PvePermissionError):
                denied += 1
            elif isinstance(value, PveError):
                # a locked guest is an answer (our own reading covers it); any other failure is a gap, said once
                if "lock" not in value.message.lower():
                    unread.append(value)
            else:
                self.data.preconditions[int(key.split(":", 1)[1])] = value
        if unread:
            self._gaps.append(
                Missing(
                    what=f"PVE's migrate preconditions (the cross-check) for {len(unread)} VM(s)",
                    path="/nodes/{node}/qemu/{vmid}/migrate",
                    error=unread[0].message[:200],
                    status=unread[0].status,
                    affects=("migration",),
                    optional=True,
                )
            )
        if denied:
            self._denied(
                f"PVE's migrate preconditions for {denied} VM(s)",
                "/nodes/{node}/qemu/{vmid}/migrate",
                "token lacks VM.Migrate",
                ("migration",),
            )

    async def _wave3(self, agent_probe_limit: int, pending_probe_limit: int | None = None) -> None:
        d = self.data
        reads: list[Read] = []
        if self._want("guests") and pending_probe_limit is not None:  # None: the caller does not ask
            reads += self._pending_reads(pending_probe_limit)
        if self._want("guests"):
            for vmid, raw in d.configs.items():
                g = d.guests[vmid]
                if raw.get("parent"):
                    reads.append(
                        (
                            f"snapshots:{vmid}",
                            api_path("nodes", node_seg(g["node"]), g["type"], vmid_seg(vmid), "snapshot"),
                            {},
                        )
                    )
            probes = [
                vmid
                for vmid, raw in sorted(d.configs.items())
                if d.guests[vmid]["type"] == "qemu"
                and d.guests[vmid].get("status") == "running"
                and parse_property_string(str(raw.get("agent", "0")), "enabled").get("enabled") == "1"
            ]
            if len(probes) > agent_probe_limit:
                self._gaps.append(
                    Missing.capped(
                        f"guest-agent probes beyond the first {agent_probe_limit} of {len(probes)} VMs",
                        "agent_probe_limit",
                        ("guests",),
                    )
                )
            for vmid in probes[:agent_probe_limit]:
                g = d.guests[vmid]
                reads.append(
                    (
                        f"agent:{vmid}",
                        api_path("nodes", node_seg(g["node"]), "qemu", vmid_seg(vmid), "agent", "info"),
                        {},
                    )
                )
        if self._want("backups"):
            for task in d.tasks:
                status = task.get("status")
                if (
                    task.get("type") == "vzdump"
                    and not task_running(task)
                    and status != "OK"
                    and not str(status).startswith("WARNINGS")
                ):
                    reads.append(
                        (
                            f"log:{task['upid']}",
                            api_path("nodes", node_seg(task["node"]), "tasks", upid_seg(task["upid"]), "log"),
                            {"limit": 5000},
                        )
                    )
        got = await self._read(reads)
        self._take_agent_probes(got)
        self._take_pending(got)
        for key, value in got.items():
            kind, _, ident = key.partition(":")
            if isinstance(value, PveError):
                self._miss(f"{kind} of {ident}", key, value, None, ("guests",) if kind == "snapshots" else ("backups",))
                continue
            if kind == "snapshots":
                d.snapshots[int(ident)] = value
            elif kind == "log":
                d.task_logs[ident] = [str(line.get("t", "")) for line in value]

    def _pending_reads(self, limit: int) -> list[Read]:
        """Pending changes of running guests (PVE applies a stopped guest's changes at once: qemu-server
        API2/Qemu.pm update_vm_api, pve-container API2/LXC/Config.pm update_vm), one call each, at most
        ``limit`` (lowest vmids first); the rest is said as CHECK_SKIPPED."""
        d = self.data
        running = [v for v in sorted(d.configs) if d.guests[v].get("status") == "running"]
        if len(running) > limit:
            self._gaps.append(
                Missing.capped(
                    f"pending-change reads beyond the first {limit} of {len(running)} running guests",
                    "pending_probe_limit",
                    ("guests",),
                )
            )
        return [
            (
                f"pending:{v}",
                api_path("nodes", node_seg(d.guests[v]["node"]), d.guests[v]["type"], vmid_seg(v), "pending"),
                {},
            )
            for v in running[:limit]
        ]

    def _take_pending(self, got: dict[str, Any]) -> None:
        denied = 0
        for key in [k for k in got if k.startswith("pending:")]:
            value, vmid = got.pop(key), int(key.split(":", 1)[1])
            if not isinstance(value, PveError):
                self.data.pending[vmid] = value
            elif isinstance(value, PvePermissionError):
                denied += 1
            else:
                g = self.data.guests.get(vmid, {})
                self._miss(f"pending changes of guest {vmid}", key, value, g.get("node"), ("guests",))
        if denied:
            self._denied(
                f"pending changes of {denied} guest(s) (optional: needs more privileges)",
                "/nodes/{node}/{type}/{vmid}/pending",
                "token lacks VM.Audit on the guest",
                ("guests",),
            )

    def _take_agent_probes(self, got: dict[str, Any]) -> None:
        """Only PVE's own "QEMU guest agent is not running" (qemu-server QemuServer/Agent.pm
        ``assert_agent_available``, after a failed guest-ping) says the agent is down. A 403 (PVE 9 needs
        VM.GuestAgent.Audit, PVE 8 VM.Monitor), an unreachable node (595) or any other error means we could
        not check; a VM that stopped or lost its agent option meanwhile is simply not judged."""
        denied = 0
        for key in [k for k in got if k.startswith("agent:")]:
            value, vmid = got.pop(key), int(key.split(":", 1)[1])
            if not isinstance(value, PveError):
                self.data.agent[vmid] = True
            elif isinstance(value, PvePermissionError):
                denied += 1
            elif "guest agent is not running" in value.message.lower():
                self.data.agent[vmid] = False
            elif "is not running" in value.message or "No QEMU guest agent configured" in value.message:
                continue
            else:
                g = self.data.guests.get(vmid, {})
                self._miss(f"guest-agent state of VM {vmid}", key, value, g.get("node"), ("guests",))
        if denied:
            self._denied(
                f"guest-agent state of {denied} VM(s) (optional: needs more privileges)",
                "/nodes/{node}/qemu/{vmid}/agent/info",
                "token lacks VM.GuestAgent.Audit (PVE 9) or VM.Monitor (PVE 8)",
                ("guests",),
            )

    def _denied(self, what: str, path: str, error: str, affects: tuple[str, ...]) -> None:
        self._gaps.append(Missing.denied(what, path, error, affects))


async def collect(
    client: ProxmoxClient,
    now: float,
    areas: Iterable[str],
    *,
    vmids: list[int] | None = None,
    node: str | None = None,
    preconditions: bool = False,
    agent_probe_limit: int = 0,
    pbs: PbsLink | None = None,
    pending_probe_limit: int | None = None,
) -> ClusterData:
    return await Collector(client, now, areas, pbs).run(
        vmids=vmids,
        node=node,
        preconditions=preconditions,
        agent_probe_limit=agent_probe_limit,
        pending_probe_limit=pending_probe_limit,
    )
