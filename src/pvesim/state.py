"""The simulated cluster: nodes, storages, guests, volumes, HA, jobs, tasks.

Plain dataclasses with the units PVE uses (bytes, seconds, fractions 0..1). The API handlers
render these into PVE's response shapes; scenarios build them; tasks mutate them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pvesim import pveconfig
from pvesim.access import AccessDb, Token
from pvesim.ceph import Ceph
from pvesim.firewall import Firewall
from pvesim.nodehealth import NodeHealth
from pvesim.sdn import Sdn

MiB = 1024**2
GiB = 1024**3


class Clock:
    """Wall-clock time plus an offset the control API can advance (for lock and task ages)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class Node:
    name: str
    nodeid: int
    ip: str
    online: bool = True
    cpus: int = 16
    sockets: int = 1
    cpu_model: str = "AMD EPYC 7302P 16-Core Processor"
    cpu_flags: str = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 ssse3 sse4_1 sse4_2 avx avx2"
    mhz: float = 3000.0
    memory_total: int = 128 * GiB
    memory_base_used: int = 6 * GiB  # the host, before guests and the ZFS ARC
    zfs_arc: int = 0  # ZFS ARC size: used memory to the kernel (not in MemAvailable)
    swap_total: int = 8 * GiB
    swap_used: int = 0
    rootfs_total: int = 100 * GiB
    rootfs_used: int = 12 * GiB
    ksm_shared: int = 0
    cpu_usage: float = 0.12
    loadavg: tuple[float, float, float] = (0.8, 0.9, 1.1)
    uptime: int = 3_456_000
    kernel: str = "6.14.11-4-pve"
    level: str = ""
    subscription: dict[str, Any] = field(default_factory=lambda: {"status": "notfound"})
    lrm_mode: str = "active"  # active | maintenance
    # an online node's LRM as the HA status shows it: ok | dead (stale status) | unreadable (no status file) |
    # time_drift (status stamped ahead of the answering node's clock)
    lrm: str = "ok"
    certificates: list[dict[str, Any]] = field(default_factory=list)
    apt_updates: list[dict[str, Any]] = field(default_factory=list)
    repositories: dict[str, Any] = field(default_factory=dict)
    disks: list[dict[str, Any]] = field(default_factory=list)
    zfs: list[dict[str, Any]] = field(default_factory=list)
    vzdump_conf: dict[str, Any] = field(default_factory=dict)  # /etc/vzdump.conf on this node
    # upgrade readiness knobs (pvesim/system.py renders them): package versions (None: not installed),
    # systemd active states (or "not-found"), the node's notes, network interfaces, cgroup mode (1 = legacy)
    packages: dict[str, str | None] = field(default_factory=dict)
    services: dict[str, str] = field(default_factory=dict)
    description: str | None = None
    acme: str | None = None  # the node config's ACME domains (pveupdate renews its certificate)
    node_config: dict[str, Any] = field(default_factory=dict)  # the node config's other keys
    network: list[dict[str, Any]] = field(default_factory=list)
    cgroup_mode: int = 2
    health: NodeHealth = field(default_factory=NodeHealth)  # services, clock, network, ... (nodehealth.py)
    journal: list[dict[str, Any]] = field(default_factory=list)  # the scenario's own journal lines (logs.py)


# pve-storage src/PVE/Storage/Plugin.pm @SHARED_STORAGE (stable-8; master drops glusterfs with its plugin):
# parse_config sets ``shared 1`` on every storage of these types, whatever storage.cfg says.
SHARED_STORAGE = frozenset({"iscsi", "nfs", "cifs", "rbd", "cephfs", "iscsidirect", "glusterfs", "zfs", "drbd", "pbs"})


@dataclass
class Storage:
    """A datacenter storage definition (storage.cfg) plus its per-node capacity."""

    storage: str
    type: str
    content: list[str]
    shared: bool = False
    nodes: list[str] | None = None  # None = every node
    disable: bool = False
    options: dict[str, Any] = field(default_factory=dict)  # path, pool, vgname, thinpool, server, datastore...
    total: int = 500 * GiB
    used: int = 100 * GiB
    per_node: dict[str, tuple[int, int]] = field(default_factory=dict)  # node -> (total, used) overrides
    inactive_on: list[str] = field(default_factory=list)

    def available_on(self, node: str) -> bool:
        """pve-storage src/PVE/Storage.pm storage_check_enabled: not disabled, and the node in its nodes list."""
        return not self.disable and (self.nodes is None or node in self.nodes)

    def capacity(self, node: str) -> tuple[int, int]:
        return self.per_node.get(node, (self.total, self.used))

    def add_used(self, node: str, delta: int) -> None:
        if self.shared:
            self.used = max(0, self.used + delta)
            return
        total, used = self.capacity(node)
        self.per_node[node] = (total, max(0, used + delta))


@dataclass
class Volume:
    """A volume that is not a guest disk: backups, ISOs, templates, orphaned images."""

    volid: str
    storage: str
    node: str | None  # None for shared storage
    content: str
    size: int
    ctime: int
    format: str = "raw"
    vmid: int | None = None
    notes: str | None = None
    protected: bool = False
    verification: dict[str, Any] | None = None
    subtype: str | None = None
    encrypted: str | None = None  # a PBS backup's key fingerprint ('1' when encrypted without one known)


@dataclass
class Snapshot:
    name: str
    snaptime: int
    description: str = ""
    vmstate: bool = False
    parent: str | None = None
    config: dict[str, str] = field(default_factory=dict)


_MAXDISK_KEYS = frozenset(["rootfs", "scsi0", "virtio0", "sata0", "ide0"])

Volumes = tuple[tuple[str, str, dict[str, str]], ...]


@dataclass(frozen=True)
class Parsed:
    """A config's volumes and root disk size, kept with the items they were parsed from."""

    items: tuple[tuple[str, str], ...]
    volumes: Volumes
    root_size: str | None  # the first root-disk key's size=, as /cluster/resources's maxdisk reads it

    @classmethod
    def of(cls, items: tuple[tuple[str, str], ...], guest_type: str) -> Parsed:
        volumes = []
        for key, value in items:
            vol = pveconfig.volume_of(key, value, guest_type)
            if vol is not None:
                volumes.append((key, vol[0], vol[1]))
        sizes = (opts["size"] for key, _volid, opts in volumes if key in _MAXDISK_KEYS and "size" in opts)
        root = next(sizes, None)
        boot = dict(items).get("boot", "")
        if boot.startswith("order="):  # qemu-server Drive.pm bootdisk_size: the first disk of the boot order
            sized = {k: opts["size"] for k, _volid, opts in volumes if "size" in opts and opts.get("media") != "cdrom"}
            root = next((sized[d] for d in boot[6:].split(",")[0].split(";") if d in sized), root)
        return cls(items, tuple(volumes), root)


@dataclass
class Guest:
    vmid: int
    type: str  # qemu | lxc
    node: str
    config: dict[str, str]
    status: str = "stopped"  # running | stopped
    qmpstatus: str | None = None  # paused / suspended for qemu
    started_at: float | None = None
    cpu_usage: float = 0.05
    mem_fraction: float = 0.6
    agent_responding: bool = True
    agent_data: dict[str, Any] = field(default_factory=dict)  # what the guest agent answers: interfaces, osinfo, fsinfo
    running_qemu: str | None = None  # the QEMU the VM was started with (None: the release's current one)
    running_machine: str | None = None  # the machine QEMU reports (None: derived from config and running_qemu)
    cloudinit: dict[str, str] = field(default_factory=dict)  # [special:cloudinit]: old values of changed options
    pool: str | None = None  # resource pool membership (user.cfg)
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    # the config's [PENDING] section: values waiting for a restart, and keys to delete (True: force)
    pending: dict[str, str] = field(default_factory=dict)
    pending_delete: dict[str, bool] = field(default_factory=dict)
    # kept with what they were built from: the parsed config, and api/render.py's /cluster/resources row
    _memo: Parsed | None = field(init=False, repr=False, compare=False)
    resource_memo: tuple[tuple[Any, ...], dict[str, Any]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # set here, not as class defaults: an attribute first set later gives each of 10,000 guests a
        # dict of its own (832 bytes, not 192 with the keys shared), and every loop over guests slowed
        self._memo = None
        self.resource_memo = None

    def current_config(self) -> dict[str, str]:
        """The config with pending changes applied (AbstractConfig load_current_config, current=0)."""
        merged = dict(self.config) | self.pending
        for key in self.pending_delete:
            merged.pop(key, None)
        return merged

    def apply_pending(self) -> None:
        """What a start (and an API reboot) does: qemu-server vmconfig_apply_pending, pve-container alike."""
        self.config = self.current_config()
        self.pending.clear()
        self.pending_delete.clear()

    @property
    def name(self) -> str:
        key = "name" if self.type == "qemu" else "hostname"
        return self.config.get(key, f"{'VM' if self.type == 'qemu' else 'CT'} {self.vmid}")

    @property
    def lock(self) -> str | None:
        return self.config.get("lock")

    @property
    def template(self) -> bool:
        return self.config.get("template") == "1"

    @property
    def maxmem(self) -> int:
        memory = self.config.get("memory", "512")  # PVE's default for VMs and containers
        return int(memory.split("=")[-1]) * MiB

    @property
    def maxcpu(self) -> int:
        cores = int(self.config.get("cores", 1))
        return cores * int(self.config.get("sockets", 1)) if self.type == "qemu" else cores

    def parsed(self) -> Parsed:
        """The config parsed once while it stays the same: /cluster/resources and storage content ask every
        guest on every call, and parsing made their answers 25-40 ms of the simulator's one event loop, which
        every other request waited for (issue 17, design record 261204-41). Any change to the config, by
        whichever code path, changes its items and so parses again."""
        items = tuple(self.config.items())
        memo = self._memo
        if memo is None or memo.items != items:
            memo = self._memo = Parsed.of(items, self.type)
        return memo

    def volumes(self) -> Volumes:
        """(key, volid, options) for every volume the config references, in config order (read only)."""
        return self.parsed().volumes

    def maxdisk(self) -> int:
        size = self.parsed().root_size
        return 0 if size is None else pveconfig.parse_size(size)

    @property
    def digest(self) -> str:
        pending = dict(self.pending)
        if self.pending_delete:  # qemu-server print_pending_delete: '!' marks a forced delete
            pending["delete"] = ",".join(("!" if f else "") + k for k, f in self.pending_delete.items())
        return pveconfig.digest(self.config, {n: s.config for n, s in self.snapshots.items()}, pending)

    @property
    def sid(self) -> str:
        return f"{'vm' if self.type == 'qemu' else 'ct'}:{self.vmid}"


@dataclass
class HAResource:
    sid: str
    state: str = "started"  # started | stopped | disabled | ignored
    group: str | None = None
    max_restart: int = 1
    max_relocate: int = 1
    failback: bool = True
    comment: str | None = None
    crm_state: str | None = None  # runtime override: error, fence, recovery, freeze...

    @property
    def vmid(self) -> int:
        return int(self.sid.split(":", 1)[1])

    @property
    def type(self) -> str:
        return self.sid.split(":", 1)[0]


@dataclass
class ReplicationJob:
    id: str
    guest: int
    target: str
    schedule: str | None = None  # unset: PVE's default */15 (ReplicationConfig.pm), and absent from its rows
    disable: bool = False
    remove_job: str | None = None
    rate: float | None = None
    comment: str | None = None
    last_sync: int = 0
    last_try: int = 0
    fail_count: int = 0
    error: str | None = None
    duration: float | None = 4.2  # of the last run (shown once a run ended: last_try set)
    # replication.cfg's stored source; None: the guest's node (job_status writes it there on its next run)
    source: str | None = None
    running: bool = False  # a run in progress: the state file has its pid and ptime (record_job_start)

    @property
    def jobnum(self) -> int:
        return int(self.id.split("-", 1)[1])


@dataclass
class Task:
    upid: str
    node: str
    pid: int
    pstart: int
    starttime: int
    type: str
    id: str
    user: str
    status: str | None = None  # None while running, then "OK" or the error text
    endtime: int | None = None
    log: list[str] = field(default_factory=list)
    done_at: float | None = None  # monotonic deadline while running
    finish: Callable[[], str | None] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.status is None


@dataclass
class Cluster:
    """Everything pvesim knows; one instance per running simulator."""

    name: str
    version: str  # pve-manager release, e.g. "9.1.2"
    schema_version: str  # which API schema to enforce: "8.4" or "9.1"
    clock: Clock
    nodes: dict[str, Node] = field(default_factory=dict)
    storages: dict[str, Storage] = field(default_factory=dict)
    guests: dict[int, Guest] = field(default_factory=dict)
    volumes: list[Volume] = field(default_factory=list)
    ha_resources: dict[str, HAResource] = field(default_factory=dict)
    ha_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    ha_rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    ha_master: str | None = None
    # HA disarmed (pve-ha-manager 5.1.3+ disarm-ha): {"mode": freeze|ignore, "state": disarming|disarmed}
    ha_disarm: dict[str, str] | None = None
    backup_jobs: list[dict[str, Any]] = field(default_factory=list)
    replication: dict[str, ReplicationJob] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)
    tokens: dict[str, Token] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    quorate: bool = True
    speed: float = 1.0
    ceph: Ceph | None = None  # None: Ceph is not installed
    access: AccessDb = field(default_factory=AccessDb)  # user.cfg, tfa.cfg, domains.cfg
    firewall: Firewall = field(default_factory=Firewall)  # cluster.fw and each host.fw
    metric_servers: list[dict[str, Any]] = field(default_factory=list)  # status.cfg
    cluster_log: list[dict[str, Any]] = field(default_factory=list)  # the cluster log's entries, oldest first
    sdn: Sdn | None = None  # None: no SDN objects configured
    next_pid: int = 20_000
    roles: dict[str, frozenset[str]] = field(default_factory=dict)  # built-in (as the release has them) + custom
    corosync: dict[str, Any] = field(default_factory=dict)  # knobs: nodes (per-node overrides), totem, qdevice
    acme: dict[str, Any] = field(default_factory=dict)  # accounts (names) and plugins (acme/plugins.cfg)
    notifications: dict[str, Any] = field(default_factory=dict)  # notifications.cfg: endpoints per type, matchers
    realm_sync: list[dict[str, Any]] = field(default_factory=list)  # jobs.cfg's realm-sync jobs

    @property
    def release(self) -> str:
        return ".".join(self.version.split(".")[:2])

    def node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def guest_on(self, node: str, vmid: int, gtype: str) -> Guest | None:
        guest = self.guests.get(vmid)
        if guest is None or guest.node != node or guest.type != gtype:
            return None
        return guest

    def ha_resource_for(self, guest: Guest) -> HAResource | None:
        return self.ha_resources.get(guest.sid)

    def node_mem_used(self, node: str) -> int:
        n = self.nodes[node]
        used = n.memory_base_used + n.zfs_arc
        for g in self.guests.values():
            if g.node == node and g.status == "running":
                used += int(g.maxmem * g.mem_fraction)
        return min(used, n.memory_total)

    def mem_used_by_node(self) -> dict[str, int]:
        """Every node's ``node_mem_used`` in one pass over the guests (/cluster/resources lists all nodes)."""
        used = {name: n.memory_base_used + n.zfs_arc for name, n in self.nodes.items()}
        for g in self.guests.values():
            if g.status == "running" and g.node in used:
                used[g.node] += int(g.maxmem * g.mem_fraction)
        return {name: min(u, self.nodes[name].memory_total) for name, u in used.items()}
