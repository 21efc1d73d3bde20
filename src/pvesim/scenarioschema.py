"""The scenario format: every key the loader reads, with its meaning, as pydantic models.

``build_cluster`` validates a scenario against :class:`Scenario` before it loads it, and a key the models do
not know is refused with its place in the file; ``docs/scenarios.md`` is rendered from these models
(``pvesim docs``), and a test fails when the page is stale. So the documented format is the loaded format:
a key a loader starts reading must be declared here first.

Values keep PVE's notation: sizes as PVE writes them (``32G``, ``512M``) or bytes; ages relative to the
simulator's clock (``26h``, ``6d59m``, ``-5m`` for the future); guest configs, storage.cfg options,
datacenter.cfg options and jobs.cfg sections as PVE's own keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pvesim.faults import Faults

Size = int | float | str
Age = int | float | str


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# ---------------------------------------------------------------- nodes


class Certificate(_Spec):
    """A certificate of /etc/pve/nodes/<node>/ (``/nodes/{node}/certificates/info``)."""

    filename: str = Field("pve-ssl.pem", description="pve-root-ca.pem, pve-ssl.pem, pveproxy-ssl.pem")
    expires_in: Age = Field("700d", description="time until notAfter")
    issued_ago: Age = Field("300d", description="time since notBefore")
    subject: str | None = Field(None, description="the subject (default: PVE's own)")
    issuer: str | None = Field(None, description="the issuer (default: the cluster CA)")
    key_type: str = Field("rsaEncryption", description="public-key-type")
    key_bits: int = Field(2048, description="public-key-bits")


class Update(_Spec):
    """A pending package update (``/nodes/{node}/apt/update``)."""

    package: str = Field(description="the package")
    version: str = Field(description="the new version")
    old: str = Field("", description="the installed version")
    title: str | None = Field(None, description="the title")
    origin: str = Field("Proxmox", description="Proxmox or Debian")
    priority: str = Field("optional", description="the package priority")
    section: str = Field("admin", description="the package section")


class AptSource(_Spec):
    """One line of /etc/apt/sources.list."""

    suite: str = Field(description="the suite (bookworm, trixie, ...)")
    uri: str = Field("http://download.proxmox.com/debian/pve", description="the repository URI")
    components: list[str] = Field(["main"], description="its components")
    enabled: bool = Field(True, description="commented out when false")


class Repositories(_Spec):
    """The node's APT repositories: which standard ones are configured and enabled."""

    enterprise: bool | None = Field(None, description="pve-enterprise: true enabled, false disabled, absent none")
    no_subscription: bool | None = Field(None, alias="no-subscription", description="pve-no-subscription")
    test: bool | None = Field(None, description="pve-test")
    sources: list[AptSource] = Field([], description="extra one-line repositories in sources.list")
    errors: list[dict[str, str]] = Field([], description="files apt cannot parse: path, error")


class Disk(_Spec):
    """A physical disk (``/nodes/{node}/disks/list``, SMART)."""

    devpath: str = Field(description="/dev/sda, /dev/nvme0n1, ...")
    type: str = Field("ssd", description="ssd, hdd, nvme, usb")
    size: Size = Field("960G", description="the size")
    model: str | None = Field(None, description="the model")
    serial: str | None = Field(None, description="the serial number")
    health: str = Field("PASSED", description="SMART health (PASSED, FAILED, UNKNOWN)")
    wearout: int | str = Field(97, description="SSD wear-out percentage left")
    vendor: str | None = Field(None, description="the vendor")
    wwn: str | None = Field(None, description="the WWN")
    rpm: int | None = Field(None, description="an HDD's spindle speed")
    transport: str | None = Field(None, description="how smartctl talks to it (sas: the SCSI report)")
    use: str | None = Field(
        None,
        description="what it holds: root, zfs, lvm, ext4, xfs, osd, partitions, mounted, unused "
        "(default: derived; see pvesim/disks.py)",
    )
    pool: str | None = Field(None, description="with use zfs or root: the ZFS pool")
    osd: int | None = Field(None, description="with use osd: the OSD id")
    vg: str | None = Field(None, description="with use lvm: the volume group")
    name: str | None = Field(None, description="with use ext4/xfs: the directory storage's name")


class ZfsPool(_Spec):
    """A ZFS pool (``/nodes/{node}/disks/zfs``)."""

    name: str = Field(description="the pool")
    size: Size = Field("900G", description="its size")
    alloc: Size = Field("300G", description="allocated")
    frag: int = Field(10, description="fragmentation percentage")
    health: str = Field("ONLINE", description="ONLINE, DEGRADED, FAULTED, ...")


class Thinpool(_Spec):
    """An LVM thin pool (``/nodes/{node}/disks/lvmthin``)."""

    vg: str = Field("pve", description="the volume group")
    lv: str = Field("data", description="the thin pool LV")
    lv_size: Size = Field("800G", description="its size")
    used: Size = Field("200G", description="data used")
    metadata_size: Size = Field("1G", description="metadata size")
    metadata_pct: float = Field(12, description="metadata used, percent")


class Health(_Spec):
    """Node health problems to plant (pvesim/nodehealth.py); absent: a healthy node."""

    services: dict[str, str] = Field({}, description="service -> SubState (running, dead, failed, exited)")
    clock_offset: float = Field(0, description="seconds the clock is ahead (negative: behind)")
    timezone: str = Field("Europe/Berlin", description="the node's time zone")
    kernel_installed: str | None = Field(None, description="the newest installed kernel (default: the running one)")
    packages: dict[str, str] = Field({}, description="package -> installed version that differs (a partial upgrade)")
    dns: dict[str, str] = Field({}, description="/etc/resolv.conf: dns1, dns2, dns3, search")
    hosts_extra: list[str] = Field([], description="lines /etc/hosts has beyond the installer's")
    network: dict[str, dict[str, Any]] = Field({}, description="iface -> fields merged into the default interfaces")
    network_changes: str | None = Field(None, description="the diff of a pending /etc/network/interfaces.new")
    lvmthin: list[Thinpool] = Field([Thinpool()], description="the thin pools")
    iommu: bool = Field(True, description="false: no IOMMU (every PCI device in group -1)")
    smart: dict[str, dict[int, int]] = Field({}, description="devpath -> ATA attribute id -> raw value")
    zfs_errors: dict[str, str] = Field({}, description="pool -> the errors line of zpool status")
    rrd: dict[str, float] = Field({}, description="day averages: cpu, iowait (fractions), pressure* (percent)")
    mdev: dict[str, list[dict[str, Any]]] = Field({}, description="PCI id -> mediated device types")


class JournalLine(_Spec):
    """A line of the node's journal (``/nodes/{node}/syslog``, ``/journal``)."""

    msg: str = Field(description="the message")
    age: Age = Field("1h", description="when")
    ident: str = Field("pvedaemon", description="the syslog identifier")
    unit: str | None = Field(None, description="the systemd unit (default: <ident>.service)")
    pid: int | None = Field(None, description="the process id")
    priority: int = Field(6, description="syslog priority 0-7")
    count: int = Field(1, description="repeated this many times, a second apart")


class Amount(_Spec):
    """A used/total pair."""

    total: Size | None = Field(None, description="the total")
    used: Size | None = Field(None, description="what is used")


class Node(_Spec):
    """A cluster node."""

    name: str = Field(description="the node name")
    nodeid: int | None = Field(None, description="corosync node id (default: its position)")
    ip: str | None = Field(None, description="its address (default 10.0.0.<10+nodeid>)")
    online: bool = Field(True, description="false: the node is down (595 for its calls)")
    cpus: int = Field(16, description="CPU threads")
    sockets: int = Field(1, description="sockets")
    cpu_model: str = Field("AMD EPYC 7302P 16-Core Processor", description="the CPU model")
    cpu_flags: str | None = Field(None, description="/proc/cpuinfo flags")
    mhz: float = Field(3000.0, description="clock")
    kernel: str = Field("6.14.11-4-pve", description="the running kernel")
    level: str = Field("", description="subscription level ('' none, c, b, s, p)")
    lrm_mode: str = Field("active", description="HA LRM mode: active or maintenance")
    lrm: str = Field("ok", description="the LRM of an online node: ok, dead, unreadable or time_drift")
    cpu_usage: float = Field(0.12, description="CPU use, 0..1")
    uptime: int = Field(3_456_000, description="seconds since boot")
    subscription: dict[str, Any] = Field({"status": "notfound"}, description="/nodes/{node}/subscription as is")
    memory: Size = Field("128G", description="RAM")
    memory_used: Size = Field("6G", description="RAM the host uses before guests and the ZFS ARC")
    zfs_arc: Size = Field(0, description="the ZFS ARC")
    swap: Amount | None = Field(None, description="swap total/used")
    rootfs: Amount | None = Field(None, description="the root file system total/used")
    ksm_shared: Size = Field(0, description="memory KSM shares")
    loadavg: list[float] = Field([0.8, 0.9, 1.1], description="1, 5, 15 minute load")
    certificates: list[Certificate] = Field([], description="its certificates (default: root CA and pve-ssl)")
    updates: list[Update] = Field([], description="pending APT updates")
    repositories: Repositories = Field(Repositories(), description="APT repositories")
    disks: list[Disk] = Field([], description="physical disks (default: one NVMe)")
    zfs: list[ZfsPool] = Field([], description="ZFS pools")
    vzdump: dict[str, Any] = Field({}, description="/etc/vzdump.conf")
    packages: dict[str, str | None] = Field({}, description="installed package versions (null: not installed)")
    services: dict[str, str] = Field({}, description="service -> active state (active, inactive, failed, not-found)")
    description: str | None = Field(None, description="the node's notes")
    description_bytes: Size | None = Field(None, description="notes of this many bytes (pve8to9's limit)")
    acme: str | None = Field(None, description="the node config's ACME entry: [account=<name>,]domains=<d1;d2>")
    node_config: dict[str, Any] = Field(
        {}, description="the node config's other keys: acmedomain<n>, wakeonlan, ballooning-target, ..."
    )
    network: list[dict[str, Any]] = Field([], description="interface rows merged over the default ones")
    cgroup_mode: int = Field(2, description="1: legacy cgroup hierarchy")
    health: Health | None = Field(None, description="health problems to plant")
    journal: list[JournalLine] = Field([], description="the scenario's own journal lines")


# ---------------------------------------------------------------- storages, guests, volumes


class StorageUse(_Spec):
    total: Size | None = Field(None, description="capacity")
    used: Size | None = Field(None, description="used")


class Storage(_Spec):
    """A storage.cfg entry; any other key is the entry's own option (path, pool, server, datastore, ...)."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(description="the storage id")
    type: str = Field(description="dir, lvmthin, zfspool, rbd, nfs, cifs, pbs, ...")
    content: list[str] = Field(["images"], description="content types")
    shared: bool = Field(False, description="shared (always for nfs, rbd, pbs, ...)")
    nodes: list[str] | None = Field(None, description="the nodes it is restricted to")
    disable: bool = Field(False, description="disabled")
    total: Size = Field("500G", description="capacity")
    used: Size = Field("100G", description="used")
    per_node: dict[str, StorageUse] = Field({}, description="node -> capacity of a local storage there")
    inactive_on: list[str] = Field([], description="nodes where it cannot be activated")


class SnapshotSpec(_Spec):
    name: str = Field(description="the snapshot name")
    age: Age = Field("1d", description="its age")
    description: str = Field("", description="its description")
    vmstate: bool = Field(False, description="with RAM")


class Guest(_Spec):
    """A VM or container."""

    vmid: int = Field(description="the VMID")
    node: str = Field(description="its node")
    type: str = Field("qemu", description="qemu or lxc")
    config: dict[str, Any] = Field({}, description="the config in PVE's notation (scsi0: local-lvm:vm-100-disk-0,...)")
    status: str = Field("stopped", description="running or stopped")
    qmpstatus: str | None = Field(None, description="a running VM's QMP status: paused, suspended, prelaunch")
    uptime: Age = Field("12d", description="a running guest's uptime")
    cpu: float = Field(0.05, description="CPU use, 0..1")
    mem: float = Field(0.6, description="share of its memory in use")
    agent_responding: bool = Field(True, description="false: the guest agent does not answer")
    agent_data: dict[str, Any] = Field(
        {}, description="what the agent reports: interfaces, osinfo, fsinfo, users, host-name, timezone, files, ..."
    )
    pool: str | None = Field(None, description="its resource pool")
    pending: dict[str, Any] = Field({}, description="config values pending until the next start")
    pending_delete: list[str] = Field([], description="keys deleted at the next start ('!key': forced)")
    snapshots: list[SnapshotSpec] = Field([], description="snapshots, oldest first")
    description_bytes: Size | None = Field(None, description="notes of this many bytes (pve8to9's limit)")
    running_qemu: str | None = Field(None, description="the QEMU it was started with (default: the release's)")
    running_machine: str | None = Field(None, description="the machine it runs (default: from config and QEMU)")
    cloudinit: dict[str, Any] = Field(
        {},
        description="a VM's [special:cloudinit] section: the values its cloud-init drive was generated with for "
        "options changed since, 'added' the options set since",
    )


class BackupSpec(_Spec):
    """A backup on a storage."""

    vmid: int = Field(description="the guest")
    storage: str = Field(description="the storage")
    age: Age = Field("1d", description="its age")
    size: Size = Field("8G", description="its size")
    verification: str | None = Field(None, description="PBS verification state: ok or failed")
    notes: str | None = Field(None, description="notes (default: the guest's name)")
    protected: bool = Field(False, description="protected")
    node: str | None = Field(None, description="for a local storage: its node")
    subtype: str | None = Field(None, description="qemu or lxc (default: the guest's type)")
    encrypted: bool | str | None = Field(None, description="PBS: encrypted (true) or its key's fingerprint")


class VolumeSpec(_Spec):
    """Another volume: an ISO, a template, an orphaned image."""

    volid: str = Field(description="the volume id")
    node: str | None = Field(None, description="for a local storage: its node")
    content: str = Field("iso", description="iso, vztmpl, images, import, ...")
    size: Size = Field("1G", description="its size")
    age: Age = Field("30d", description="its age")
    format: str = Field("iso", description="its format")
    vmid: int | None = Field(None, description="its owner")


# ---------------------------------------------------------------- HA, jobs, tasks


class HaResourceSpec(_Spec):
    sid: str = Field(description="vm:<vmid> or ct:<vmid>")
    state: str = Field("started", description="started, stopped, disabled, ignored")
    group: str | None = Field(None, description="its HA group (PVE 8)")
    max_restart: int = Field(1, description="max_restart")
    max_relocate: int = Field(1, description="max_relocate")
    failback: bool = Field(True, description="failback")
    comment: str | None = Field(None, description="its comment")
    crm_state: str | None = Field(None, description="the CRM's state: error, fence, recovery, freeze, ...")


class HaDisarm(_Spec):
    """HA disarmed (pve-ha-manager 5.1.3+ ``ha-manager crm-command disarm-ha``)."""

    mode: str = Field("freeze", description="freeze (services kept where they are) or ignore (HA leaves them be)")
    state: str = Field("disarmed", description="disarming or disarmed")


class Ha(_Spec):
    master: str | None = Field(None, description="the CRM master node")
    disarm: HaDisarm | None = Field(None, description="HA disarmed: maintenance requests are ignored then")
    resources: list[HaResourceSpec] = Field([], description="HA resources")
    groups: dict[str, dict[str, Any]] = Field({}, description="HA groups (PVE 8; migrated to rules on PVE 9)")
    rules: dict[str, dict[str, Any]] = Field({}, description="HA rules (PVE 9; groups on PVE 8)")
    groups_migrated: bool = Field(True, description="PVE 9: groups already migrated to rules")


class ReplicationSpec(_Spec):
    """A storage replication job (replication.cfg and pvesr's state)."""

    id: str = Field(description="<vmid>-<n>")
    target: str = Field(description="the target node")
    schedule: str | None = Field(None, description="calendar event (default */15)")
    disable: bool = Field(False, description="disabled")
    remove_job: str | None = Field(None, description="local or full: marked for removal")
    rate: float | None = Field(None, description="rate limit, MB/s")
    comment: str | None = Field(None, description="its comment")
    fail_count: int = Field(0, description="failed runs in a row")
    error: str | None = Field(None, description="the last run's error")
    last_sync_age: Age = Field("5m", description="age of the last good sync ('never')")
    last_try_age: Age | None = Field(None, description="age of the last run (default: last_sync_age)")
    running: bool = Field(False, description="a run in progress (its pid in the state)")


class TaskSpec(_Spec):
    """A finished task in a node's task index."""

    node: str = Field(description="the node")
    type: str = Field(description="the worker type: vzdump, qmstart, qmigrate, ...")
    id: str | int = Field("", description="the task id (often the VMID)")
    age: Age = Field("1h", description="when it started")
    duration: Age = Field("2m", description="how long it ran")
    user: str = Field("root@pam", description="who ran it")
    status: str = Field("OK", description="OK or the error text")
    log: list[str] = Field([], description="its log lines")


class TokenSpec(_Spec):
    """An API token (default: root@pam!pvesim and three auditor/operator tokens)."""

    id: str = Field(description="user@realm!name")
    acl: list[dict[str, Any]] = Field([], description="the token's ACL entries: path, role, propagate")
    user_acl: list[dict[str, Any]] = Field([], description="its user's ACL entries")
    privsep: bool = Field(True, description="privilege separation")
    secret: str | None = Field(None, description="its secret (default: random)")
    comment: str | None = Field(None, description="its comment")
    expire_in: Age | None = Field(None, description="time until it expires")
    expired: Age | None = Field(None, description="time since it expired")


class ClusterLogSpec(_Spec):
    node: str = Field(description="the node")
    msg: str = Field(description="the message")
    age: Age = Field("1h", description="when")
    pri: int = Field(3, description="syslog priority")
    tag: str = Field("pvedaemon", description="the tag")
    user: str = Field("root@pam", description="the user")
    count: int = Field(1, description="repeated this many times")


class TaskFailure(_Spec):
    type: str | None = Field(None, description="the task type that fails (any when absent)")
    id: str | int | None = Field(None, description="the task id that fails")
    error: str = Field("simulated failure", description="the error")


# ---------------------------------------------------------------- access, firewall


class AccessUser(_Spec):
    userid: str = Field(description="user@realm")
    enable: int | bool = Field(1, description="enabled")
    expire_in: Age | None = Field(None, description="time until the account expires")
    expired: Age | None = Field(None, description="time since it expired")
    email: str | None = Field(None, description="e-mail")
    comment: str | None = Field(None, description="comment")
    firstname: str | None = Field(None, description="first name")
    lastname: str | None = Field(None, description="last name")
    groups: list[str] = Field([], description="its groups")
    tfa: list[str] = Field([], description="its second factors: totp, webauthn, recovery, yubico, u2f")
    tokens: list[dict[str, Any]] = Field([], description="its tokens: tokenid, privsep, comment, expire_in")


class Access(_Spec):
    """user.cfg, tfa.cfg and domains.cfg beyond the API tokens' users. Every line grants as PVE's do: a group's to
    its members (and their tokens without privilege separation), a pool's role to the pool's guests (``pool`` of
    a guest) and storages."""

    users: list[AccessUser] = Field([], description="users")
    groups: dict[str, str] = Field({}, description="group -> comment")
    acl: list[dict[str, Any]] = Field([], description="ACL entries: path, user|group|token, role, propagate")
    realms: list[dict[str, Any]] = Field([], description="extra realms: realm, type, comment, tfa, default")
    pools: dict[str, dict[str, Any]] = Field({}, description="pool -> comment, storage (its storages)")


class FwFile(_Spec):
    """A .fw file: options, rules, aliases, IPSets."""

    options: dict[str, Any] = Field({}, description="[OPTIONS]")
    rules: list[dict[str, Any]] = Field([], description="[RULES] as the API returns them (enable defaults to 1)")
    aliases: dict[str, Any] = Field({}, description="name -> cidr, or {cidr, comment}")
    ipsets: dict[str, Any] = Field(
        {}, description="name -> members (cidr or {cidr, nomatch, comment}) or {comment, members}"
    )


class FirewallLogEvent(_Spec):
    """An event in a node's /var/log/pve-firewall.log."""

    node: str | None = Field(None, description="the node (default: every node)")
    age: Age = Field("1h", description="when")
    vmid: int = Field(0, description="the guest (0: the host)")
    direction: str = Field("in", description="in or out")
    chain: str | None = Field(None, description="the chain (default: tap<vmid>i0-IN or PVEFW-HOST-IN)")
    action: str = Field("DROP", description="ACCEPT, DROP, REJECT")
    policy: bool = Field(True, description="logged by the policy, not a rule")
    level: str = Field("info", description="the log level")
    src: str = Field("203.0.113.7", description="source address")
    dst: str = Field("10.0.0.11", description="destination address")
    proto: str = Field("tcp", description="protocol")
    sport: int = Field(51234, description="source port")
    dport: int = Field(22, description="destination port")
    count: int = Field(1, description="repeated this many times")


class Firewall(FwFile):
    """cluster.fw (options, rules, aliases, IPSets), security groups, hosts and guests."""

    groups: dict[str, Any] = Field({}, description="security group -> rules, or {comment, rules}")
    hosts: dict[str, dict[str, Any]] = Field({}, description="node -> host.fw options, or {options, rules}")
    guests: dict[int, FwFile] = Field({}, description="vmid -> <vmid>.fw")
    log: list[FirewallLogEvent] = Field([], description="firewall log events")


# ---------------------------------------------------------------- Ceph, SDN, cluster config


class CephOsd(_Spec):
    node: str = Field(description="its host")
    id: int | None = Field(None, description="the OSD id (default: its position)")
    size: Size = Field("1T", description="its size")
    used: Size = Field(0, description="used")
    up: bool = Field(True, description="up")
    in_: bool = Field(True, alias="in", description="in")
    latency: int = Field(2, description="commit/apply latency, ms")
    class_: str = Field("ssd", alias="class", description="device class")
    version: str | None = Field(None, description="its Ceph version (default: the cluster's)")


class CephPool(_Spec):
    name: str = Field(description="the pool")
    id: int | None = Field(None, description="its id")
    size: int = Field(3, description="replicas")
    min_size: int = Field(2, description="min_size")
    pg_num: int = Field(128, description="PGs")
    stored: Size = Field(0, description="user data stored")
    autoscale: str = Field("on", description="pg_autoscale_mode")
    pg_num_final: int | None = Field(None, description="the autoscaler's target")
    quota: Size = Field(0, description="quota_max_bytes")
    pg_num_min: int | None = Field(None, description="the autoscaler's lower bound")
    target_size: Size | None = Field(None, description="target_size_bytes")
    target_size_ratio: float | None = Field(None, description="target_size_ratio")
    application: str | None = Field(None, description="rbd, cephfs, mgr, rgw (default: from the name)")


class CephMon(_Spec):
    node: str = Field(description="its host")
    name: str | None = Field(None, description="its id (default: the node)")
    up: bool = Field(True, description="up")
    avail_pct: int = Field(80, description="free space of its data directory")
    version: str | None = Field(None, description="its version")
    in_monmap: bool = Field(True, description="false: a stale [mon.<id>] section only")


class CephDaemon(_Spec):
    node: str = Field(description="its host")
    name: str | None = Field(None, description="its id (default: the node)")
    up: bool = Field(True, description="a manager: up")
    state: str | None = Field(None, description="an MDS: active, standby or stopped")


class Ceph(_Spec):
    """A Ceph cluster; absent: Ceph is not installed."""

    version: str = Field("19.2.3", description="the Ceph version")
    fsid: str | None = Field(None, description="the fsid")
    nearfull_ratio: float = Field(0.85, description="nearfull ratio")
    backfillfull_ratio: float = Field(0.90, description="backfillfull ratio")
    full_ratio: float = Field(0.95, description="full ratio")
    osds: list[CephOsd] = Field([], description="OSDs")
    pools: list[CephPool] = Field([], description="pools")
    mons: list[CephMon] | None = Field(None, description="monitors (default: the first three nodes)")
    mgrs: list[CephDaemon] | None = Field(None, description="managers (default: one per monitor)")
    mds: list[CephDaemon] = Field([], description="metadata servers")
    installed: list[str] | None = Field(None, description="nodes with the Ceph packages (default: all)")
    api_node: str | None = Field(None, description="the node answering /cluster/ceph (default: the first)")
    installed_versions: dict[str, str] = Field({}, description="node -> package version that differs")
    flags: list[str] = Field([], description="OSD flags set: noout, ...")
    config: dict[str, dict[str, Any]] = Field(
        {}, description="ceph.conf changes: section -> key -> value (null removes)"
    )
    configdb: list[dict[str, Any]] | None = Field(None, description="`ceph config dump` entries: section, name, value")
    health_checks: dict[str, dict[str, Any]] = Field({}, description="extra health checks: severity, message, count")
    initialized: bool = Field(True, description="false: installed, `pveceph init` never ran")


class Sdn(_Spec):
    """SDN objects (pve-network); absent: none."""

    zones: list[dict[str, Any]] = Field([], description="zones: id, type, nodes, state, pending, ... (zones.cfg keys)")
    vnets: list[dict[str, Any]] = Field([], description="vnets: id, zone, tag, alias, errors (node -> message), ...")
    controllers: list[dict[str, Any]] = Field([], description="controllers: id, type, asn, peers, ...")
    fabrics: list[dict[str, Any]] = Field(
        [], description="PVE 9 fabrics: id, protocol, ip_prefix, nodes, not_ok, neighbors"
    )
    subnets: list[dict[str, Any]] = Field([], description="subnets: vnet, subnet (cidr), gateway, snat, ...")
    ipams: dict[str, dict[str, Any]] = Field({}, description="IPAM plugins beside the built-in 'pve'")
    dns: dict[str, dict[str, Any]] = Field({}, description="DNS plugins")
    vnet_firewall: dict[str, dict[str, Any]] = Field({}, description="vnet -> its firewall: options, rules")
    reload_pending: list[str] = Field([], description="nodes not reloaded since the last apply")


class Corosync(_Spec):
    nodes: dict[str, dict[str, Any] | None] = Field({}, description="node -> corosync.conf nodelist changes")
    totem: dict[str, Any] = Field({}, description="totem changes (null removes)")
    qdevice: bool = Field(False, description="a QDevice is configured")


class Acme(_Spec):
    accounts: list[str] = Field([], description="ACME accounts (beyond those the nodes' configs name)")
    plugins: dict[str, dict[str, Any]] = Field({}, description="acme/plugins.cfg entries (standalone is built in)")


class MetricServer(_Spec):
    id: str = Field(description="its id")
    type: str = Field(description="influxdb or graphite")
    server: str = Field(description="its address")
    port: int = Field(description="its port")
    disable: int = Field(0, description="disabled")


# ---------------------------------------------------------------- the scenario


class Scenario(_Spec):
    """A simulated cluster."""

    name: str = Field("pvesim", description="the cluster name")
    version: str = Field("9.1.2", description="pve-manager version: 8.x or 9.x")
    schema_: str | None = Field(
        None, alias="schema", description="the API schema to enforce: 8.4 or 9.1 (default: from version)"
    )
    speed: float = Field(1.0, description="simulated seconds per wall-clock second for tasks")
    quorate: bool = Field(True, description="the cluster has quorum")
    options: dict[str, Any] = Field(
        {}, description="datacenter.cfg (ha, migration, next-id, tag-style, ...) and resource mappings (mappings)"
    )
    nodes: list[Node] = Field([], description="the nodes")
    storages: list[Storage] = Field([], description="storage.cfg")
    guests: list[Guest] = Field([], description="VMs and containers")
    backups: list[BackupSpec] = Field([], description="backups on storages")
    volumes: list[VolumeSpec] = Field([], description="other volumes")
    ha: Ha = Field(Ha(), description="the HA stack")
    backup_jobs: list[dict[str, Any]] = Field([], description="jobs.cfg vzdump jobs (PVE's keys)")
    replication: list[ReplicationSpec] = Field([], description="replication jobs")
    tasks: list[TaskSpec] = Field([], description="finished tasks")
    tokens: list[TokenSpec] | None = Field(None, description="API tokens (default: four, see pvesim/scenario.py)")
    scoped_tokens: bool = Field(
        False, description="add the scoped tokens PVE's filtered lists show part of the cluster to (SCOPED_TOKENS)"
    )
    roles: dict[str, list[str]] = Field({}, description="custom roles: name -> privileges")
    corosync: Corosync = Field(Corosync(), description="corosync.conf knobs")
    access: Access = Field(Access(), description="user.cfg and its kin")
    firewall: Firewall | None = Field(
        None, description="the firewall (default: on, SSH and GUI from the management net)"
    )
    metric_servers: list[MetricServer] = Field([], description="status.cfg")
    cluster_log: list[ClusterLogSpec] = Field([], description="cluster log entries beyond the tasks'")
    task_failures: list[TaskFailure] = Field([], description="tasks that will fail when they run")
    ceph: Ceph | None = Field(None, description="Ceph")
    sdn: Sdn | None = Field(None, description="SDN")
    faults: Faults | None = Field(None, description="latency, errors, dropped connections (pvesim/faults.py)")
    acme: Acme = Field(Acme(), description="ACME accounts and plugins")
    notifications: dict[str, Any] = Field(
        {},
        description="notifications.cfg beyond the built-ins: sendmail, smtp, gotify, webhook, matchers "
        "(name -> config)",
    )
    realm_sync: list[dict[str, Any]] = Field([], description="jobs.cfg realm-sync jobs: id, realm, schedule, ...")


# a hand-written scenario is checked value by value; a generated one (thousands of guests) by its keys only
FULL_CHECK_UP_TO = 500


def check(data: dict[str, Any]) -> None:
    """Refuse a scenario with a key the loader does not know, or a value of the wrong kind, naming where."""
    problems = list(_unknown_keys(data, Scenario, ""))
    if problems:
        raise ValueError("invalid scenario: " + "; ".join(problems[:5]))
    if len(data.get("guests") or []) > FULL_CHECK_UP_TO:
        return
    try:
        Scenario.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"{where}: unknown key (the documented keys are in docs/scenarios.md)")
            else:
                problems.append(f"{where}: {err['msg']}")
        raise ValueError("invalid scenario: " + "; ".join(problems)) from None


def _models_in(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds and how: directly ('one'), in a list ('list') or as a map's values ('map')."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "one"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list and args:
        model, how = _models_in(args[0])
        return (model, "list") if how == "one" else (None, "")
    if origin is dict and len(args) == 2:
        model, how = _models_in(args[1])
        return (model, "map") if how == "one" else (None, "")
    for arg in args:  # a union: X | None
        model, how = _models_in(arg)
        if model is not None:
            return model, how
    return None, ""


@cache
def _keys_of(model: type[BaseModel]) -> tuple[dict[str, tuple[type[BaseModel] | None, str]], bool]:
    """A model's keys (aliases where set), each with the model it nests, and whether it forbids others."""
    keys = {f.alias or name: _models_in(f.annotation) for name, f in model.model_fields.items()}
    return keys, model.model_config.get("extra") == "forbid"


def _unknown_keys(data: Any, model: type[BaseModel], where: str) -> Iterator[str]:
    """Keys a model does not declare (where it forbids others), recursively: fast enough for 10,000 guests."""
    if not isinstance(data, dict):
        return
    keys, forbid = _keys_of(model)
    for key, value in data.items():
        nested = keys.get(str(key))
        if nested is None:
            if forbid:
                yield f"{where}{key}: unknown key (the documented keys are in docs/scenarios.md)"
            continue
        sub, how = nested
        if sub is None or value is None:
            continue
        if how == "one":
            yield from _unknown_keys(value, sub, f"{where}{key}.")
        elif how == "list" and isinstance(value, list):
            for i, item in enumerate(value):
                yield from _unknown_keys(item, sub, f"{where}{key}[{i}].")
        elif how == "map" and isinstance(value, dict):
            for k, item in value.items():
                yield from _unknown_keys(item, sub, f"{where}{key}.{k}.")
