"""Scenarios: YAML descriptions of a cluster, loaded into :class:`pvesim.state.Cluster`.

Guest configs are written in PVE's own notation (``scsi0: local-lvm:vm-100-disk-0,size=32G``);
times are ages relative to the simulator's clock (``age: 26h``), so scenarios never go stale.
Sizes use PVE's suffixes (``32G``). Every scenario gets four API tokens unless it defines its
own: ``root@pam!pvesim`` (full), ``auditor@pve!mcp`` (PVEAuditor on /), ``monitor@pve!mcp``
(auditor plus the custom role ``BackupLister`` = Datastore.AllocateSpace and VM.Backup on /, without
which PVE lists no backup) and ``operator@pve!mcp`` (auditor plus PVEVMAdmin on /vms,
PVEDatastoreUser on /storage and the custom role ``HAOperator`` = Sys.Console on /, which PVE
requires for HA migrate/relocate). ``scoped_tokens: true`` adds :data:`SCOPED_TOKENS`: tokens PVE shows only part
of the cluster, as careful admins scope them (design record 261206-55).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import pickle
import re
import secrets
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from pvesim import pveconfig, scenarioschema
from pvesim.access import PVE8_ONLY, PVE9_ONLY, ROLES, AclEntry, ClusterUserCfg, Principal, Token, access_from
from pvesim.apischema import schema_versions
from pvesim.ceph import ceph_from
from pvesim.faults import Faults
from pvesim.firewall import cluster_log_from, firewall_from
from pvesim.nodehealth import health_from
from pvesim.sdn import sdn_from
from pvesim.state import (
    SHARED_STORAGE,
    Clock,
    Cluster,
    Guest,
    HAResource,
    Node,
    ReplicationJob,
    Snapshot,
    Storage,
    Task,
    Volume,
)
from pvesim.tasks import make_upid

_AGE = re.compile(r"^(-?)((?:\d+(?:\.\d+)?\s*[smhdw]\s*)+|\d+(?:\.\d+)?)$")
_AGE_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

DEFAULT_TOKENS: list[dict[str, Any]] = [
    {"id": "root@pam!pvesim", "acl": [{"path": "/", "role": "Administrator"}], "comment": "pvesim full access"},
    {
        "id": "auditor@pve!mcp",
        "user_acl": [{"path": "/", "role": "PVEAuditor"}],
        "acl": [{"path": "/", "role": "PVEAuditor"}],
    },
    {
        "id": "monitor@pve!mcp",
        "user_acl": [{"path": "/", "role": "PVEAuditor"}, {"path": "/", "role": "BackupLister"}],
        "acl": [{"path": "/", "role": "PVEAuditor"}, {"path": "/", "role": "BackupLister"}],
    },
    {
        "id": "operator@pve!mcp",
        "user_acl": [
            {"path": "/", "role": "PVEAuditor"},
            {"path": "/vms", "role": "PVEVMAdmin"},
            {"path": "/storage", "role": "PVEDatastoreUser"},
            {"path": "/", "role": "HAOperator"},
        ],
        "acl": [
            {"path": "/", "role": "PVEAuditor"},
            {"path": "/vms", "role": "PVEVMAdmin"},
            {"path": "/storage", "role": "PVEDatastoreUser"},
            {"path": "/", "role": "HAOperator"},
        ],
    },
]


def _scoped(tokenid: str, comment: str, *acl: tuple[str, str]) -> dict[str, Any]:
    entries = [{"path": path, "role": role} for path, role in acl]
    return {"id": tokenid, "user_acl": entries, "acl": entries, "comment": comment}


# Tokens PVE's filtered lists show only part of the cluster to (the token and its user hold the same ACL).
SCOPED_TOKENS: list[dict[str, Any]] = [
    _scoped("vmonly@pve!mcp", "guests only", ("/vms", "PVEAuditor")),
    _scoped(
        "somestorage@pve!mcp",
        "every storage hidden but local",
        ("/", "PVEAuditor"),
        ("/", "BackupLister"),
        ("/storage", "NoAccess"),
        ("/storage/local", "PVEAuditor"),
    ),
    _scoped(
        "noroot@pve!mcp",
        "auditor everywhere but on / itself",
        *((path, "PVEAuditor") for path in ("/vms", "/storage", "/nodes", "/pool", "/sdn", "/access", "/mapping")),
    ),
    _scoped(
        "hiddenguest@pve!mcp",
        "monitor without guest 101",
        ("/", "PVEAuditor"),
        ("/", "BackupLister"),
        ("/vms/101", "NoAccess"),
    ),
    _scoped("team@pve!mcp", "a team's resource pool only (truth.yaml's prod)", ("/pool/prod", "PVEAuditor")),
    _scoped(
        "hiddennode@pve!mcp",
        "monitor without the second node",
        ("/", "PVEAuditor"),
        ("/", "BackupLister"),
        ("/nodes/pve2", "NoAccess"),
        ("/nodes/m2", "NoAccess"),
    ),
]


def parse_age(value: Any) -> float:
    """'26h' -> seconds, units combined as PVE's own durations are ('6d59m', '1h30m', '2w3d'); a plain number
    is seconds; a leading '-' is the future."""
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    m = _AGE.match(text)
    if not m:
        raise ValueError(f"invalid age '{value}' (use e.g. 90s, 45m, 26h, 3d, 2w, or combined: 6d59m, 1h30m)")
    units = [unit for _n, unit in _AGE_PART.findall(m.group(2))]
    if len(units) != len(set(units)):
        raise ValueError(f"invalid age '{value}': a unit given twice")
    seconds = sum(float(n) * _AGE_UNITS[unit] for n, unit in _AGE_PART.findall(m.group(2)))
    return -seconds if m.group(1) else seconds


def size(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else pveconfig.parse_size(str(value))


def builtin_scenarios() -> list[str]:
    return list(_builtin_names())


@functools.cache
def _builtin_names() -> tuple[str, ...]:
    folder = resources.files("pvesim").joinpath("scenarios")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))


def safe_yaml(text: str) -> Any:
    """``yaml.safe_load`` with libyaml's parser where PyYAML has it: the same data, about 8x faster (the test
    suite loads a scenario for every simulator it starts)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def _builtin(name: str) -> bytes:
    """A built-in scenario parsed once per process, kept pickled: a caller changes what it loads (tests do),
    so each load unpickles a copy of its own (0.2 ms, where building the demo from YAML took 17 ms)."""
    text = resources.files("pvesim").joinpath(f"scenarios/{name}.yaml").read_text(encoding="utf-8")
    return pickle.dumps(safe_yaml(text))


def load_scenario(name_or_path: str) -> dict[str, Any]:
    """Read a built-in scenario by name, or a YAML file by path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.exists():
        data = safe_yaml(path.read_text(encoding="utf-8"))
    elif name_or_path in _builtin_names():
        data = pickle.loads(_builtin(name_or_path))
    else:
        raise ValueError(f"unknown scenario '{name_or_path}' (built-in: {', '.join(builtin_scenarios())})")
    if not isinstance(data, dict):
        raise ValueError(f"scenario '{name_or_path}' is not a mapping")
    return data


def _schema_for(version: str) -> str:
    release = ".".join(version.split(".")[:2])
    known = schema_versions()
    if release in known:
        return release
    major = release.split(".")[0]
    same_major = [v for v in known if v.split(".")[0] == major]
    return same_major[-1] if same_major else known[0]


def build_cluster(data: dict[str, Any], version: str | None = None, speed: float | None = None) -> Cluster:
    """Turn scenario data into a live cluster (``version``/``speed`` override the scenario's); a key the
    documented format (pvesim/scenarioschema.py) does not have is refused."""
    scenarioschema.check(data)
    clock = Clock()
    now = clock.now()
    pve_version = str(version or data.get("version", "9.1.2"))
    c = Cluster(
        name=str(data.get("name", "pvesim")),
        version=pve_version,
        schema_version=str(data.get("schema") or _schema_for(pve_version)),
        clock=clock,
        speed=float(speed if speed is not None else data.get("speed", 1.0)),
    )
    c.options = dict(data.get("options", {}))
    c.quorate = bool(data.get("quorate", True))
    roles = _version_roles(pve_version)
    builtin = frozenset(roles)
    roles["HAOperator"] = frozenset({"Sys.Console"})
    # what the storage content index asks of a token before it lists a backup (pve-storage check_volume_access)
    roles["BackupLister"] = frozenset({"Datastore.AllocateSpace", "VM.Backup"})
    for name, privs in (data.get("roles") or {}).items():
        roles[name] = frozenset(privs)
    for i, nd in enumerate(data.get("nodes", []), start=1):
        c.nodes[nd["name"]] = _node(nd, i, now)
    for sd in data.get("storages", []):
        c.storages[sd["id"]] = _storage(sd)
    for gd in data.get("guests", []):
        g = _guest(gd, now)
        if g.node not in c.nodes:
            raise ValueError(f"guest {g.vmid} is on unknown node '{g.node}'")
        if g.vmid in c.guests:
            raise ValueError(f"duplicate vmid {g.vmid}")
        c.guests[g.vmid] = g
    for bd in data.get("backups", []):
        c.volumes.append(_backup(c, bd, now))
    for vd in data.get("volumes", []):
        c.volumes.append(
            Volume(
                vd["volid"],
                vd["volid"].split(":", 1)[0],
                vd.get("node"),
                vd.get("content", "iso"),
                size(vd.get("size", "1G")),
                int(now - parse_age(vd.get("age", "30d"))),
                vd.get("format", "iso"),
                vd.get("vmid"),
            )
        )
    ha = data.get("ha") or {}
    c.ha_master = ha.get("master")
    if ha.get("disarm"):
        mode, state = str(ha["disarm"].get("mode", "freeze")), str(ha["disarm"].get("state", "disarmed"))
        if mode not in ("freeze", "ignore") or state not in ("disarming", "disarmed"):
            raise ValueError(f"ha.disarm: mode must be freeze|ignore, state disarming|disarmed (got {mode}, {state})")
        c.ha_disarm = {"mode": mode, "state": state}
    for rd in ha.get("resources", []):
        res = HAResource(
            sid=rd["sid"],
            state=rd.get("state", "started"),
            group=rd.get("group"),
            max_restart=rd.get("max_restart", 1),
            max_relocate=rd.get("max_relocate", 1),
            failback=bool(rd.get("failback", True)),
            comment=rd.get("comment"),
            crm_state=rd.get("crm_state"),
        )
        c.ha_resources[res.sid] = res
    c.ha_groups = {k: dict(v) for k, v in (ha.get("groups") or {}).items()}
    c.ha_rules = {k: dict(v) for k, v in (ha.get("rules") or {}).items()}
    if major(pve_version) >= 9:
        if ha.get("groups_migrated", True):
            _migrate_groups_to_rules(c)
    else:
        _rules_to_groups(c)
    c.backup_jobs = [_backup_job(j, major(pve_version)) for j in data.get("backup_jobs", [])]
    for rd in data.get("replication", []):
        c.replication[rd["id"]] = _replication(rd, now)
    for td in data.get("tasks", []):
        c.tasks.append(_task(td, now))
    c.roles = dict(roles)
    c.corosync = dict(data.get("corosync") or {})
    c.acme = dict(data.get("acme") or {})
    c.notifications = dict(data.get("notifications") or {})
    c.realm_sync = [dict(j) for j in data.get("realm_sync") or []]
    declared = [*(data.get("tokens") or DEFAULT_TOKENS), *(SCOPED_TOKENS if data.get("scoped_tokens") else [])]
    for td in declared:
        token = _token(td, roles)
        c.tokens[token.full_id] = token
    c.access = access_from(data, list(c.tokens.values()), declared, roles, builtin, now)
    usercfg = ClusterUserCfg(c.access, lambda vmid: g.pool if (g := c.guests.get(vmid)) else None)
    for token in c.tokens.values():
        token.usercfg = usercfg
    c.firewall = firewall_from(data.get("firewall"), list(c.nodes))
    c.metric_servers = [dict(m) for m in data.get("metric_servers", [])]
    c.cluster_log = cluster_log_from(data.get("cluster_log", []), c.tasks, now)
    c.options.setdefault("task_failures", list(data.get("task_failures", [])))
    c.ceph = ceph_from(data.get("ceph"), list(c.nodes))
    c.sdn = sdn_from(data.get("sdn"), list(c.nodes), major(pve_version))
    return c


def major(version: str) -> int:
    """The PVE major release of a version string ("8.4.14" -> 8)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdecimal() else 9


def _version_roles(version: str) -> dict[str, frozenset[str]]:
    """Built-in roles as the release defines them (pve-access-control AccessControl.pm ``$privgroups``): PVE 9
    dropped VM.Monitor (0706945) and added the VM.GuestAgent.* privileges (922f710) and VM.Replicate (5f7544f);
    Sys.AccessNetwork is in both (36c1814, access-control 8.1.2)."""
    drop = PVE8_ONLY if major(version) >= 9 else PVE9_ONLY
    return {name: privs - drop for name, privs in ROLES.items()}


def _migrate_groups_to_rules(c: Cluster) -> None:
    """PVE 9's CRM migrates HA groups to node-affinity rules once every node runs 9 and then empties
    groups.cfg (pve-ha-manager Manager.pm, Groups.pm ``migrate_groups_to_rules``): a PVE 9 scenario's groups
    become rules ``ha-group-<name>`` and its resources lose their ``group``."""
    members: dict[str, list[str]] = {}
    for res in c.ha_resources.values():
        if res.group and res.group in c.ha_groups:
            members.setdefault(res.group, []).append(res.sid)
            res.group = None
    for name, sids in sorted(members.items()):
        c.ha_rules[f"ha-group-{name}"] = group_as_rule(name, c.ha_groups[name], sids)
    c.ha_groups.clear()


def group_as_rule(name: str, group: dict[str, Any], sids: list[str]) -> dict[str, Any]:
    rule: dict[str, Any] = {"type": "node-affinity", "resources": ",".join(sorted(sids)), "nodes": group.get("nodes")}
    if group.get("restricted") is not None:
        rule["strict"] = int(group["restricted"])
    rule["comment"] = group.get("comment") or f"Generated from HA group '{name}'."
    return rule


def _rules_to_groups(c: Cluster) -> None:
    """PVE 8 has HA groups and no rules: a scenario's node-affinity rules become groups of the same name
    (restricted = strict, resources join the group); resource-affinity rules have no PVE 8 form and are dropped."""
    for name, rule in sorted(c.ha_rules.items()):
        if rule.get("type") != "node-affinity" or int(rule.get("disable", 0) or 0):
            continue
        group = {"nodes": rule.get("nodes"), "restricted": int(rule.get("strict", 0) or 0)}
        if rule.get("comment"):
            group["comment"] = rule["comment"]
        c.ha_groups.setdefault(name, group)
        for sid in str(rule.get("resources") or "").split(","):
            res = c.ha_resources.get(sid.strip())
            if res is not None and not res.group:
                res.group = name
    c.ha_rules.clear()


_NOTIFY_KEYS = ("mailnotification", "notification-mode", "notification-policy", "notification-target", "mailto")


def _backup_job(job: dict[str, Any], pve_major: int) -> dict[str, Any]:
    """A jobs.cfg vzdump job as the release's GUI writes a new one: with PVE 8's mail setting
    (``mailnotification always``, the default its editor sent) or PVE 9's ``notification-mode auto``, unless the
    scenario sets how the job notifies."""
    out = dict(job)
    if not any(k in out for k in _NOTIFY_KEYS):
        if pve_major >= 9:
            out["notification-mode"] = "auto"
        else:
            out["mailnotification"] = "always"
    return out


def faults_from(data: dict[str, Any]) -> Faults:
    return Faults.model_validate(data.get("faults") or {})


def _node(nd: dict[str, Any], nodeid: int, now: float) -> Node:
    name = nd["name"]
    n = Node(name=name, nodeid=nd.get("nodeid", nodeid), ip=nd.get("ip", f"10.0.0.{10 + nodeid}"))
    for key in (
        "online",
        "cpus",
        "sockets",
        "cpu_model",
        "cpu_flags",
        "mhz",
        "kernel",
        "level",
        "lrm_mode",
        "lrm",
        "cpu_usage",
        "uptime",
        "subscription",
    ):
        if key in nd:
            setattr(n, key, nd[key])
    if n.lrm not in ("ok", "dead", "unreadable", "time_drift"):
        raise ValueError(f"node {name}: lrm must be ok, dead, unreadable or time_drift (got {n.lrm!r})")
    if "memory" in nd:
        n.memory_total = size(nd["memory"])
    if "memory_used" in nd:
        n.memory_base_used = size(nd["memory_used"])
    if "zfs_arc" in nd:
        n.zfs_arc = size(nd["zfs_arc"])
    if "swap" in nd:
        n.swap_total = size(nd["swap"].get("total", n.swap_total))
        n.swap_used = size(nd["swap"].get("used", 0))
    if "rootfs" in nd:
        n.rootfs_total = size(nd["rootfs"].get("total", n.rootfs_total))
        n.rootfs_used = size(nd["rootfs"].get("used", n.rootfs_used))
    if "ksm_shared" in nd:
        n.ksm_shared = size(nd["ksm_shared"])
    if "loadavg" in nd:
        n.loadavg = tuple(nd["loadavg"])
    n.certificates = [
        _certificate(name, cd, now)
        for cd in nd.get("certificates", [{"filename": "pve-root-ca.pem"}, {"filename": "pve-ssl.pem"}])
    ]
    n.apt_updates = [_update(u) for u in nd.get("updates", [])]
    n.repositories = _repositories(nd.get("repositories", {"no-subscription": True}))
    n.disks = [_disk(d) for d in nd.get("disks", [{"devpath": "/dev/nvme0n1", "type": "nvme", "size": "960G"}])]
    n.zfs = [_zfs(z) for z in nd.get("zfs", [])]
    n.vzdump_conf = dict(nd.get("vzdump") or {})
    n.packages = dict(nd.get("packages") or {})
    n.services = {str(k): str(v) for k, v in (nd.get("services") or {}).items()}
    n.description = nd.get("description")
    n.acme = nd.get("acme")
    n.node_config = dict(nd.get("node_config") or {})
    if "description_bytes" in nd:  # a knob for pve8to9's 64 KiB limit: notes of this many bytes
        n.description = "#" * size(nd["description_bytes"])
    n.network = [dict(i) for i in nd.get("network") or []]
    n.cgroup_mode = int(nd.get("cgroup_mode", 2))
    n.health = health_from(nd.get("health"), n.ip)
    n.journal = [dict(e) for e in nd.get("journal") or []]
    return n


def _certificate(node: str, cd: dict[str, Any], now: float) -> dict[str, Any]:
    filename = cd.get("filename", "pve-ssl.pem")
    expires = now + parse_age(cd.get("expires_in", "700d"))
    issued = now - parse_age(cd.get("issued_ago", "300d"))
    root = filename == "pve-root-ca.pem"
    subject = cd.get(
        "subject",
        "/CN=Proxmox Virtual Environment/OU=pvesim/O=PVE Cluster Manager CA"
        if root
        else f"/OU=PVE Cluster Node/O=Proxmox Virtual Environment/CN={node}.lan",
    )
    issuer = cd.get("issuer", "/CN=Proxmox Virtual Environment/OU=pvesim/O=PVE Cluster Manager CA")
    fp = hashlib.sha256(f"{node}/{filename}".encode()).hexdigest().upper()
    return {
        "filename": filename,
        "subject": subject,
        "issuer": issuer,
        "notbefore": int(issued),
        "notafter": int(expires),
        "public-key-type": cd.get("key_type", "rsaEncryption"),
        "public-key-bits": cd.get("key_bits", 2048),
        "san": [] if root else [f"{node}.lan", node, "127.0.0.1"],
        "fingerprint": ":".join(fp[i : i + 2] for i in range(0, 64, 2)),
        "pem": "-----BEGIN CERTIFICATE-----\n(simulated)\n-----END CERTIFICATE-----\n",
    }


def _update(u: dict[str, Any]) -> dict[str, Any]:
    return {
        "Package": u["package"],
        "Version": u["version"],
        "OldVersion": u.get("old", ""),
        "Title": u.get("title", f"{u['package']} update"),
        "Description": u.get("title", ""),
        "Origin": u.get("origin", "Proxmox"),
        "Priority": u.get("priority", "optional"),
        "Section": u.get("section", "admin"),
        "Arch": "amd64",
    }


def _repositories(spec: dict[str, Any]) -> dict[str, Any]:
    handles = {"enterprise": "pve-enterprise", "no-subscription": "pve-no-subscription", "test": "pve-test"}
    standard = []
    for handle, name in handles.items():
        status = spec.get(handle)
        row: dict[str, Any] = {"handle": handle, "name": name}
        if status is not None:
            row["status"] = 1 if status else 0
        standard.append(row)
    # the files apt reads are derived from standard-repos when served (api/nodes.py apt_repositories); a
    # scenario may add one-line repositories in /etc/apt/sources.list (suites, components) with ``sources``
    files: list[dict[str, Any]] = []
    if spec.get("sources"):
        files.append(
            {
                "path": "/etc/apt/sources.list",
                "file-type": "list",
                "repositories": [_source(src) for src in spec["sources"]],
                "digest": [1] * 32,
            }
        )
    errors = [{"path": str(e["path"]), "error": str(e["error"])} for e in spec.get("errors") or []]
    return {"standard-repos": standard, "errors": errors, "infos": [], "files": files}


def _source(src: dict[str, Any]) -> dict[str, Any]:
    """One repository as proxmox-apt's APTRepository answers it."""
    return {
        "Types": ["deb"],
        "URIs": [str(src.get("uri", "http://download.proxmox.com/debian/pve"))],
        "Suites": [str(src["suite"])],
        "Components": [str(c) for c in src.get("components", ["main"])],
        "Options": [],
        "Comment": "",
        "FileType": "list",
        "Enabled": 0 if src.get("enabled") is False else 1,
    }


def _disk(d: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "devpath": d["devpath"],
        "type": d.get("type", "ssd"),
        "size": size(d.get("size", "960G")),
        "model": d.get("model", "SAMSUNG MZQL2960HCJR-00A07"),
        "serial": d.get("serial", "S64FNE0R" + d["devpath"].rsplit("/", 1)[-1][-4:].upper()),
        "health": d.get("health", "PASSED"),
        "wearout": d.get("wearout", 97),
        "vendor": d.get("vendor", "Samsung"),
        "wwn": d.get("wwn", "unknown"),
    }
    if d.get("type") == "hdd":
        row["rpm"] = d.get("rpm", 7200)
        row["wearout"] = "N/A"
    if d.get("transport"):  # how smartctl talks to it (sas: the SCSI report); not a field of the disk list
        row["transport"] = d["transport"]
    for key in ("use", "pool", "osd", "vg", "name"):  # what it holds (pvesim/disks.py)
        if d.get(key) is not None:
            row[key] = d[key]
    return row


def _zfs(z: dict[str, Any]) -> dict[str, Any]:
    total = size(z.get("size", "900G"))
    alloc = size(z.get("alloc", "300G"))
    return {
        "name": z["name"],
        "size": total,
        "alloc": alloc,
        "free": total - alloc,
        "frag": z.get("frag", 10),
        "dedup": 1.0,
        "health": z.get("health", "ONLINE"),
    }


def _storage(sd: dict[str, Any]) -> Storage:
    # pve-storage src/PVE/Storage/Plugin.pm parse_config: @SHARED_STORAGE types are shared whatever the entry
    # says (other types only with ``shared 1``), and the 'local' storage loses any node restriction
    shared = sd["type"] in SHARED_STORAGE or bool(sd.get("shared", False))
    known = {"id", "type", "content", "shared", "nodes", "disable", "total", "used", "per_node", "inactive_on"}
    s = Storage(
        storage=sd["id"],
        type=sd["type"],
        content=list(sd.get("content", ["images"])),
        shared=shared,
        nodes=None if sd["id"] == "local" else sd.get("nodes"),
        disable=bool(sd.get("disable", False)),
        options={k: v for k, v in sd.items() if k not in known},
        total=size(sd.get("total", "500G")),
        used=size(sd.get("used", "100G")),
        inactive_on=list(sd.get("inactive_on", [])),
    )
    for node, cap in (sd.get("per_node") or {}).items():
        s.per_node[node] = (size(cap.get("total", s.total)), size(cap.get("used", s.used)))
    return s


def _guest(gd: dict[str, Any], now: float) -> Guest:
    config = {str(k): _config_value(v) for k, v in (gd.get("config") or {}).items()}
    if "description_bytes" in gd:  # a knob for pve8to9's 8 KiB limit on guest notes
        config["description"] = "#" * size(gd["description_bytes"])
    gtype = gd.get("type", "qemu")
    g = Guest(
        vmid=int(gd["vmid"]),
        type=gtype,
        node=gd["node"],
        config=config,
        status=gd.get("status", "stopped"),
        qmpstatus=gd.get("qmpstatus"),
        cpu_usage=float(gd.get("cpu", 0.05)),
        mem_fraction=float(gd.get("mem", 0.6)),
        agent_responding=bool(gd.get("agent_responding", True)),
        agent_data=dict(gd.get("agent_data") or {}),
        running_qemu=gd.get("running_qemu"),
        running_machine=gd.get("running_machine"),
        cloudinit={str(k): _config_value(v) for k, v in (gd.get("cloudinit") or {}).items()},
        pool=gd.get("pool"),
        pending={str(k): _config_value(v) for k, v in (gd.get("pending") or {}).items()},
        pending_delete={str(k).lstrip("!"): str(k).startswith("!") for k in gd.get("pending_delete") or []},
    )
    if g.status == "running":
        g.started_at = now - parse_age(gd.get("uptime", "12d"))
    parent = None
    for sd in gd.get("snapshots", []):
        snap_cfg = {k: v for k, v in config.items() if k not in ("lock", "parent")}
        g.snapshots[sd["name"]] = Snapshot(
            sd["name"],
            int(now - parse_age(sd.get("age", "1d"))),
            sd.get("description", ""),
            bool(sd.get("vmstate", False)),
            parent,
            snap_cfg,
        )
        parent = sd["name"]
    if parent:
        g.config["parent"] = parent
    return g


def _config_value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _backup(c: Cluster, bd: dict[str, Any], now: float) -> Volume:
    vmid = int(bd["vmid"])
    g = c.guests.get(vmid)
    gtype = bd.get("subtype", g.type if g else "qemu")
    sid = bd["storage"]
    storage = c.storages[sid]
    ctime = int(now - parse_age(bd.get("age", "1d")))
    t = dt.datetime.fromtimestamp(ctime, tz=dt.UTC)
    if storage.type == "pbs":
        kind = "vm" if gtype == "qemu" else "ct"
        volid, fmt = f"{sid}:backup/{kind}/{vmid}/{t:%Y-%m-%dT%H:%M:%SZ}", f"pbs-{kind}"
    else:
        ext = "vma.zst" if gtype == "qemu" else "tar.zst"
        volid, fmt = f"{sid}:backup/vzdump-{gtype}-{vmid}-{t:%Y_%m_%d-%H_%M_%S}.{ext}", ext
    verification = None
    if "verification" in bd:
        verification = {
            "state": bd["verification"],
            "upid": f"UPID:pbs:0000A1B2:00C0FFEE:{ctime + 3600:08X}:verify"
            f":main\\x3a{'vm' if gtype == 'qemu' else 'ct'}/{vmid}"
            ":root@pam:",
        }
    node = None if storage.shared else bd.get("node", g.node if g else next(iter(c.nodes)))
    return Volume(
        volid,
        sid,
        node,
        "backup",
        size(bd.get("size", "8G")),
        ctime,
        fmt,
        vmid,
        bd.get("notes", g.name if g else None),
        bool(bd.get("protected", False)),
        verification,
        gtype,
        _encrypted(bd.get("encrypted")),
    )


def _encrypted(value: Any) -> str | None:
    """A backup's ``encrypted``: true for '1' (PBSPlugin.pm: encrypted files, no fingerprint), a fingerprint as
    is."""
    if value is None or value is False:
        return None
    return "1" if value is True else str(value)


def _replication(rd: dict[str, Any], now: float) -> ReplicationJob:
    job = ReplicationJob(
        id=rd["id"],
        guest=int(rd["id"].split("-")[0]),
        target=rd["target"],
        schedule=rd.get("schedule"),
        disable=bool(rd.get("disable", False)),
        remove_job=rd.get("remove_job"),
        rate=rd.get("rate"),
        comment=rd.get("comment"),
        fail_count=int(rd.get("fail_count", 0)),
        error=rd.get("error"),
        running=bool(rd.get("running", False)),
    )
    synced = rd.get("last_sync_age", "5m")
    tried = rd.get("last_try_age", synced)
    # "never": before its first run PVE's state has last_sync = last_try = 0 (ReplicationState.pm extract_job_state)
    job.last_sync = 0 if synced == "never" else int(now - parse_age(synced))
    job.last_try = 0 if tried == "never" else int(now - parse_age(tried))
    return job


def _task(td: dict[str, Any], now: float) -> Task:
    start = int(now - parse_age(td.get("age", "1h")))
    duration = int(parse_age(td.get("duration", "2m")))
    pid = int(hashlib.sha1(f"{td['node']}{start}{td['type']}".encode()).hexdigest()[:5], 16)
    user = td.get("user", "root@pam")
    upid = make_upid(td["node"], pid, pid * 7, start, td["type"], str(td.get("id", "")), user)
    status = td.get("status", "OK")
    log = [*td.get("log", []), f"TASK {'OK' if status == 'OK' else 'ERROR: ' + status}"]
    return Task(
        upid=upid,
        node=td["node"],
        pid=pid,
        pstart=pid * 7,
        starttime=start,
        type=td["type"],
        id=str(td.get("id", "")),
        user=user,
        status=status,
        endtime=start + duration,
        log=log,
    )


def _token(td: dict[str, Any], roles: dict[str, frozenset[str]]) -> Token:
    userid, _, tokenid = td["id"].partition("!")
    user = Principal(
        userid, [AclEntry(a["path"], a["role"], a.get("propagate", True)) for a in td.get("user_acl", [])], roles
    )
    return Token(
        user=user,
        tokenid=tokenid,
        secret=str(td.get("secret") or secrets.token_hex(16)),
        privsep=bool(td.get("privsep", True)),
        acl=[AclEntry(a["path"], a["role"], a.get("propagate", True)) for a in td.get("acl", [])],
        roles=roles,
    )
