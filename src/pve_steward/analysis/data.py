"""The input of every diagnostic: API payloads exactly as PVE returns them, plus ``now``.

A plain dataclass (no validation pass over thousands of rows): the tools layer fills it from
concurrent reads and records every read that failed in ``missing``, which becomes a
``DATA_INCOMPLETE`` finding. Tests build it from JSON fixtures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pve_steward.analysis.catalog import Code, register_codes
from pve_steward.analysis.ceph import CephData
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.pbsdata import PbsData
from pve_steward.pve.guestconfig import GuestConfig, parse_guest_config
from pve_steward.pve.visibility import Filter, Visibility

Row = dict[str, Any]


@dataclass(frozen=True)
class Missing:
    what: str  # e.g. "guest configs on pve3", "backup contents of pbs-main"
    path: str
    error: str
    node: str | None = None
    status: int | None = None
    affects: tuple[str, ...] = ()  # areas whose checks are incomplete
    optional: bool = False  # a check limited on purpose (privileges, caps): CHECK_SKIPPED, not DATA_INCOMPLETE
    # what PVE's privilege filtering hides from this token (pve/visibility.py): limited on purpose too, yet an
    # answer that stands on it (a plan) is not complete
    hidden: bool = False

    @property
    def leaves_plan_incomplete(self) -> bool:
        """A failed read, or what PVE hides: a plan standing on it is not complete (a check limited on purpose
        is not)."""
        return not self.optional or self.hidden

    @classmethod
    def denied(cls, what: str, path: str, error: str, affects: tuple[str, ...]) -> Missing:
        """Per-guest reads a token may not make, said once for all of them: a check limited by privilege
        (CHECK_SKIPPED), never a failure or a clean bill."""
        return cls(what=what, path=path, error=error, status=403, affects=affects, optional=True)

    @classmethod
    def not_visible(
        cls,
        f: Filter,
        path: str,
        affects: Iterable[str],
        ident: object = None,
        what: str = "",
        status: int | None = None,
    ) -> Missing:
        """What PVE's privilege filtering hides from this token (pve/visibility.py): named with the privilege that
        would show it, a check limited by the token's scope (CHECK_SKIPPED), never read as absent."""
        return cls(
            what=what or f.subject(ident),
            path=path,
            error=f.reason(ident),
            status=status,
            affects=tuple(affects),
            optional=True,
            hidden=True,
        )

    @classmethod
    def capped(cls, what: str, setting: str, affects: tuple[str, ...]) -> Missing:
        """Reads left out above a configured cap (the setting names it): a limited check, not a failure."""
        return cls(what=what, path=setting, error="capped by configuration", affects=affects, optional=True)


@dataclass
class ClusterData:
    now: float
    cluster_status: list[Row] = field(default_factory=list)
    resources: list[Row] = field(default_factory=list)
    version: Row | None = None
    storage_config: list[Row] = field(default_factory=list)
    node_status: dict[str, Row] = field(default_factory=dict)
    node_storage: dict[str, list[Row]] = field(default_factory=dict)
    configs: dict[int, Row] = field(default_factory=dict)
    snapshots: dict[int, list[Row]] = field(default_factory=dict)
    backup_jobs: list[Row] = field(default_factory=list)
    not_backed_up: list[Row] | None = None
    backups: list[Row] = field(default_factory=list)  # storage content rows, each with "storage" added
    backup_storages_read: list[str] = field(default_factory=list)
    # "node@storage" -> /nodes/{n}/vzdump/defaults?storage=...; "node@": without storage (the node's own default)
    vzdump_defaults: dict[str, Row] = field(default_factory=dict)
    # node -> the storage its vzdump default is (vzdump.conf's, else 'local'), for jobs that name none; absent where
    # not read, or where vzdump.conf sets a dumpdir (analysis/vzdumptarget.py)
    vzdump_storage: dict[str, str] = field(default_factory=dict)
    tasks: list[Row] = field(default_factory=list)
    task_logs: dict[str, list[str]] = field(default_factory=dict)
    ha_status: list[Row] = field(default_factory=list)
    ha_resources: list[Row] = field(default_factory=list)
    ha_groups: list[Row] = field(default_factory=list)
    ha_rules: list[Row] = field(default_factory=list)
    replication_jobs: list[Row] = field(default_factory=list)
    replication_state: dict[str, list[Row]] = field(default_factory=dict)
    certificates: dict[str, list[Row]] = field(default_factory=dict)
    updates: dict[str, list[Row]] = field(default_factory=dict)
    repositories: dict[str, Row] = field(default_factory=dict)
    subscriptions: dict[str, Row] = field(default_factory=dict)
    disks: dict[str, list[Row]] = field(default_factory=dict)
    zfs: dict[str, list[Row]] = field(default_factory=dict)
    agent: dict[int, bool] = field(default_factory=dict)  # vmid -> agent answered
    pending: dict[int, list[Row]] = field(default_factory=dict)  # vmid -> GET .../pending (probed guests only)
    agent_fsinfo: dict[int, Any] = field(default_factory=dict)  # vmid -> guest-get-fsinfo result (agents that answered)
    # vmid -> network-get-interfaces result (agents that answered): the addresses the guest's OS holds
    agent_interfaces: dict[int, Any] = field(default_factory=dict)
    preconditions: dict[int, Row] = field(default_factory=dict)
    mappings: dict[str, list[Row]] = field(default_factory=dict)  # /cluster/mapping/{pci,usb,dir}: kind -> rows
    snapshot_configs: dict[int, dict[str, Row]] = field(default_factory=dict)  # vmid -> snapshot -> its config
    ceph: CephData | None = None  # None: no Ceph on this cluster (or not read)
    pbs: PbsData | None = None  # None: no PBS connection configured, or PBS could not be read (``missing`` says)
    # reads declared by checks (analysis/catalog.py Need): key -> node ("" for cluster-wide) -> answer.
    # A read that failed is absent here and recorded in ``missing``.
    reads: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)
    # what PVE's privilege-filtered lists show this token (pve/visibility.py); the collector reads it once.
    # Fixtures that do not say see everything, as root@pam does.
    visibility: Visibility = field(default_factory=Visibility.everything)
    # the collector's reads PVE refused or that failed, by key ("backup_jobs", "ha_resources", "tasks:pve1", ...):
    # an empty list there is not an empty cluster (key -> why)
    unread: dict[str, str] = field(default_factory=dict)
    # derived lookup tables, built on first use; a missing table is an empty dict (no throwaway {} per lookup)
    memo: defaultdict[str, Any] = field(default_factory=lambda: defaultdict(dict), repr=False)

    # ------------------------------------------------------------ derived views (computed once)

    @cached_property
    def _by_type(self) -> tuple[dict[int, Row], list[Row], set[int]]:
        """Guest rows by vmid, node rows and container vmids, in one pass over /cluster/resources."""
        guests: dict[int, Row] = {}
        nodes: list[Row] = []
        containers: set[int] = set()
        for r in self.resources:
            kind = r.get("type")
            if kind == "qemu":
                vmid = int(r["vmid"])
                guests[vmid] = r
                containers.discard(vmid)  # the last row of a vmid wins, as in the guest table
            elif kind == "lxc":
                vmid = int(r["vmid"])
                guests[vmid] = r
                containers.add(vmid)
            elif kind == "node":
                nodes.append(r)
        return guests, nodes, containers

    @cached_property
    def guests(self) -> dict[int, Row]:
        return self._by_type[0]

    @cached_property
    def guest_ids(self) -> list[int]:
        """Guest vmids in ascending order: the order every per-guest diagnostic reports in."""
        return sorted(self.guests)

    @cached_property
    def nodes(self) -> dict[str, Row]:
        """Node rows from /cluster/resources, completed with /cluster/status membership."""
        out = {r["node"]: dict(r) for r in self._by_type[1]}
        for r in self.cluster_status:
            if r.get("type") == "node":
                row = out.setdefault(r["name"], {"node": r["name"], "type": "node"})
                row["online"] = bool(r.get("online"))
        for row in out.values():
            row.setdefault("online", row.get("status") == "online")
        return out

    @cached_property
    def online_nodes(self) -> list[str]:
        return sorted(n for n, r in self.nodes.items() if r.get("online"))

    @cached_property
    def parsed(self) -> dict[int, GuestConfig]:
        out = {}
        guests, _nodes, containers = self._by_type
        for vmid, raw in self.configs.items():
            lxc = vmid in containers if vmid in guests else ("hostname" in raw or "rootfs" in raw)
            out[vmid] = parse_guest_config(raw, vmid, "lxc" if lxc else "qemu")
        return out

    @cached_property
    def storage_defs(self) -> dict[str, Row]:
        return {r["storage"]: r for r in self.storage_config}

    @cached_property
    def ha_by_sid(self) -> dict[str, Row]:
        return {r["sid"]: r for r in self.ha_resources}

    @cached_property
    def ha_by_vmid(self) -> dict[int, Row]:
        """HA resources (not ``ignored``) by guest: ``ct:N`` only for a container N, ``vm:N`` otherwise.

        None while HA is disarmed in ignore mode: then 'resources can be managed directly' and a migrate is a
        plain one (pve-ha-manager src/PVE/HA/Config.pm $service_check_ha_state)."""
        out: dict[int, Row] = {}
        if self.ha_disarmed_ignore:
            return out
        for sid, res in self.ha_by_sid.items():
            prefix, _, num = str(sid).partition(":")
            if res.get("state") == "ignored" or not num.isdecimal() or num != str(int(num)):
                continue
            vmid = int(num)
            row = self.guests.get(vmid)
            if prefix == ("ct" if row and row.get("type") == "lxc" else "vm"):
                out[vmid] = res
        return out

    @cached_property
    def ha_disarmed_ignore(self) -> bool:
        """HA disarmed (or disarming) in ignore mode: its resources are managed directly, as if not in HA
        (the status API's fencing row, pve-ha-manager src/PVE/API2/HA/Status.pm)."""
        return any(
            r.get("type") == "fencing" and r.get("resource_mode") == "ignore" and r.get("armed-state") != "armed"
            for r in self.ha_status
        )

    @cached_property
    def ha_service_states(self) -> dict[str, str]:
        """Each HA service's CRM state by sid (``crm_state``, or ``state`` where the status API has no
        ``crm_state``), from /cluster/ha/status/current."""
        return {
            str(r.get("sid")): str(r.get("crm_state") or r.get("state") or "")
            for r in self.ha_status
            if r.get("type") == "service"
        }

    @cached_property
    def replication_by_guest(self) -> dict[int, list[Row]]:
        out: dict[int, list[Row]] = {}
        for job in self.replication_jobs:
            out.setdefault(int(job.get("guest", 0)), []).append(job)
        return out

    def ha_managed(self, vmid: int) -> Row | None:
        return self.ha_by_vmid.get(vmid)

    def sees(self, f: Filter, ident: object = None) -> bool | None:
        """Whether this token sees ``ident``'s row in ``f``'s list (None: cannot tell); see pve/visibility.py."""
        return self.visibility.sees(f, ident)

    def hidden(self, f: Filter, ident: object = None) -> str | None:
        """Why ``ident`` (absent from ``f``'s list) may merely be hidden from this token; None when the token
        provably sees such a row, so that its absence is real."""
        return None if self.visibility.sees(f, ident) is True else f.hidden(ident)

    def whole(self, f: Filter, key: str | None = None) -> bool:
        """Whether ``f``'s list (the read ``key``, when one) was read and shows this token every row."""
        return (key is None or key not in self.unread) and self.visibility.whole(f) is True

    def read(self, key: str, node: str = "") -> Any:
        """A check's declared read (``node`` for per-node reads); None when it failed or was not made."""
        return self.reads.get(key, {}).get(node)

    def read_nodes(self, key: str) -> dict[str, Any]:
        """A per-node read's answers by node (only the nodes that answered)."""
        return self.reads.get(key, {})

    def missing_for(self, area: str) -> list[Missing]:
        return [m for m in self.missing if not m.affects or area in m.affects]


_validate_subject = Subject.__pydantic_validator__.validate_python  # validated, without the __init__ frame


def guest_subject(data: ClusterData, vmid: int) -> Subject:
    """The guest as a finding's subject (one shared instance per guest and snapshot)."""
    memo = data.memo["subjects"]
    subject = memo.get(vmid)
    if subject is None:
        row = data.guests.get(vmid, {})
        name, node = row.get("name"), row.get("node")
        subject = memo[vmid] = _validate_subject(
            {
                "kind": "guest",
                "id": str(vmid),
                "name": None if name is None else str(name),
                "node": None if node is None else str(node),
            }
        )
    return subject  # type: ignore[no-any-return]


register_codes(
    "data",
    __name__,
    Code(
        "DATA_INCOMPLETE",
        "warning",
        "Some data could not be read",
        "A read failed (node offline, missing privilege, timeout). Checks depending on it were not done; the "
        "report is not a clean bill of health.",
        "Fix the cause named in the evidence (bring the node back, grant the privilege) and run the check again.",
    ),
    Code(
        "CHECK_SKIPPED",
        "info",
        "A check was limited on purpose",
        "A check was skipped or capped by configuration (e.g. guest-agent probes above agent_probe_limit).",
        "Nothing is wrong in the cluster: the check was limited on purpose. If it must cover everything, grant the "
        "privilege or raise the limit its message names.",
    ),
)


def incomplete_findings(data: ClusterData, area: str) -> list[Finding]:
    out = []
    for m in data.missing_for(area):
        code = "CHECK_SKIPPED" if m.optional else "DATA_INCOMPLETE"
        out.append(
            finding(
                code,
                Subject(kind="data", id=m.path, node=m.node),
                f"{'skipped' if m.optional else 'could not read'} {m.what}: {m.error}",
                {"path": m.path, "status": m.status, "error": m.error, "affects": list(m.affects)},
            )
        )
    return out
