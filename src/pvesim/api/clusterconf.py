"""Cluster configuration reads: ACME (pve-manager PVE/API2/ACMEAccount.pm, ACMEPlugin.pm), notifications
(API2/Cluster/Notifications.pm over proxmox-notify's notifications.cfg), resource mappings (API2/Cluster/Mapping/*),
realm-sync jobs and schedule analysis (API2/Cluster/Jobs/*.pm, Jobs.pm), the pull-metrics cache
(API2/Cluster/MetricServer.pm export, PVE/PullMetric.pm)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from pvesim import calendar
from pvesim.api import render
from pvesim.api.registry import ApiError, Call, route
from pvesim.state import Cluster

# ---------------------------------------------------------------- ACME

_DIRECTORIES = [
    {"name": "Let's Encrypt V2", "url": "https://acme-v02.api.letsencrypt.org/directory"},
    {"name": "Let's Encrypt V2 Staging", "url": "https://acme-staging-v02.api.letsencrypt.org/directory"},
]
_LE_META = {
    "caaIdentities": ["letsencrypt.org"],
    "termsOfService": "https://letsencrypt.org/documents/LE-SA-v1.5-February-24-2025.pdf",
    "website": "https://letsencrypt.org",
}


def accounts(c: Cluster) -> list[str]:
    """The files of /etc/pve/priv/acme: the scenario's accounts and those the nodes' configs name."""
    names = set(c.acme.get("accounts") or [])
    for n in c.nodes.values():
        if n.acme:
            parts = dict(p.split("=", 1) for p in n.acme.split(",") if "=" in p)
            names.add(parts.get("account", "default"))
    return sorted(names)


def plugins(c: Cluster) -> dict[str, dict[str, Any]]:
    """acme/plugins.cfg; its parser always adds the 'standalone' plugin."""
    return {"standalone": {"type": "standalone"}, **{str(k): dict(v) for k, v in (c.acme.get("plugins") or {}).items()}}


@route("GET", "/cluster/acme/account")
def account_index(call: Call) -> list[dict[str, str]]:
    return [{"name": name} for name in accounts(call.cluster)]


@route("GET", "/cluster/acme/account/{name}")
def account_read(call: Call) -> dict[str, Any]:
    """ACMEAccount.pm get_account (root only: no permissions in its schema)."""
    name = call.params.get("name", "default")
    if name not in accounts(call.cluster):
        raise ApiError(500, f"ACME account config file '{name}' does not exist.")
    return {
        "account": {"status": "valid", "contact": ["mailto:root@example.com"], "createdAt": "2026-01-10T09:00:00Z"},
        "directory": _DIRECTORIES[0]["url"],
        "location": f"https://acme-v02.api.letsencrypt.org/acme/acct/{_account_number(name)}",
        "tos": _LE_META["termsOfService"],
    }


def _account_number(name: str) -> int:
    return int(hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()[:7], 16)


@route("GET", "/cluster/acme/directories")
def directories(_call: Call) -> list[dict[str, str]]:
    """ACMEAccount.pm get_directories: the known directories."""
    return [dict(d) for d in _DIRECTORIES]


def _known_directory(call: Call) -> str:
    url = str(call.params.get("directory") or _DIRECTORIES[0]["url"])
    if url not in {d["url"] for d in _DIRECTORIES}:  # PVE::ACME get_meta: the directory cannot be fetched
        raise ApiError(500, f"Failed to GET {url}: 500 Can't connect to {url.split('/')[2]}:443")
    return url


@route("GET", "/cluster/acme/meta")
def meta(call: Call) -> dict[str, Any]:
    """ACMEAccount.pm get_meta: the directory's ``meta`` (fetched from the ACME server)."""
    _known_directory(call)
    return {**_LE_META, "caaIdentities": list(_LE_META["caaIdentities"])}


@route("GET", "/cluster/acme/tos")
def tos(call: Call) -> str:
    """ACMEAccount.pm get_tos: the directory's terms of service URL."""
    _known_directory(call)
    return str(_LE_META["termsOfService"])


@route("GET", "/cluster/acme/plugins")
def plugin_index(call: Call) -> list[dict[str, Any]]:
    """ACMEPlugin.pm index: each plugin's section with its id and the file's digest."""
    cfg = plugins(call.cluster)
    digest = render.digest_of(sorted(cfg.items()))
    kind = call.params.get("type")
    return [{**v, "plugin": k, "digest": digest} for k, v in sorted(cfg.items()) if kind in (None, v.get("type"))]


@route("GET", "/cluster/acme/plugins/{id}")
def plugin_read(call: Call) -> dict[str, Any]:
    cfg = plugins(call.cluster)
    ident = call.params["id"]
    if ident not in cfg:
        raise ApiError(500, f"ACME plugin '{ident}' not defined")
    return {**cfg[ident], "plugin": ident, "digest": render.digest_of(sorted(cfg.items()))}


# acme.sh's DNS API plugins (PVE::ACME::DNSChallenge get_supported_plugins): a few of the ~150
_DNS_PLUGINS = {
    "acmedns": ("acme-dns", ["ACMEDNS_BASE_URL", "ACMEDNS_USERNAME", "ACMEDNS_PASSWORD", "ACMEDNS_SUBDOMAIN"]),
    "aws": ("Amazon Route53 (AWS)", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]),
    "cf": ("Cloudflare Managed DNS", ["CF_Token", "CF_Account_ID", "CF_Zone_ID"]),
    "hetzner": ("Hetzner", ["HETZNER_Token"]),
    "ovh": ("OVH", ["OVH_AK", "OVH_AS", "OVH_CK", "OVH_END_POINT"]),
}


@route("GET", "/cluster/acme/challenge-schema")
def challenge_schema(_call: Call) -> list[dict[str, Any]]:
    """ACMEAccount.pm challengeschema: each DNS plugin's id, name, type and the schema of its data fields."""
    return [
        {
            "id": ident,
            "name": name,
            "type": "dns",
            "schema": {"fields": {f: {"type": "string", "description": f} for f in fields}, "name": name},
        }
        for ident, (name, fields) in sorted(_DNS_PLUGINS.items())
    ]


# ---------------------------------------------------------------- notifications (proxmox-notify)

_ENDPOINT_TYPES = ("sendmail", "smtp", "gotify", "webhook")


def notification_config(c: Cluster) -> dict[str, dict[str, dict[str, Any]]]:
    """notifications.cfg and its built-ins: the sendmail endpoint mail-to-root and the default-matcher that
    routes everything there (proxmox-notify's builtin config), with the scenario's own entries."""
    spec = c.notifications
    out: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in (*_ENDPOINT_TYPES, "matcher")}
    out["sendmail"]["mail-to-root"] = {
        "mailto-user": ["root@pam"],
        "comment": "Send mails to root@pam's email address",
        "origin": "builtin",
    }
    out["matcher"]["default-matcher"] = {
        "target": ["mail-to-root"],
        "comment": "Route all notifications to mail-to-root",
        "origin": "builtin",
    }
    for kind, entries in out.items():
        key = "matchers" if kind == "matcher" else kind
        for name, cfg in (spec.get(key) or {}).items():
            builtin = entries.get(str(name))
            origin = "modified-builtin" if builtin is not None else "user-created"
            entries[str(name)] = {**(builtin or {}), **dict(cfg), "origin": origin}
    return out


def _secretless(kind: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """Endpoint configs come without their secrets (gotify token, smtp password, webhook secrets' values)."""
    out = {k: v for k, v in cfg.items() if k not in ("token", "password")}
    if kind == "webhook" and "secret" in out:
        out["secret"] = [{"name": str(s.get("name", s)) if isinstance(s, dict) else str(s)} for s in out["secret"]]
    return out


def _endpoint_routes(kind: str) -> None:
    def index(call: Call) -> list[dict[str, Any]]:
        cfg = notification_config(call.cluster)[kind]
        return [{"name": name, **_secretless(kind, v)} for name, v in sorted(cfg.items())]

    def read(call: Call) -> dict[str, Any]:
        cfg = notification_config(call.cluster)[kind]
        name = call.params["name"]
        if name not in cfg:
            raise ApiError(404, f"endpoint '{name}' does not exist", newline=False)
        entry = {k: v for k, v in _secretless(kind, cfg[name]).items() if k != "origin"}
        return {"name": name, **entry, "digest": render.digest_of(sorted(cfg.items()))}

    route("GET", f"/cluster/notifications/endpoints/{kind}")(index)
    route("GET", f"/cluster/notifications/endpoints/{kind}/{{name}}")(read)


for _kind in _ENDPOINT_TYPES:
    _endpoint_routes(_kind)


@route("GET", "/cluster/notifications/matchers")
def matchers(call: Call) -> list[dict[str, Any]]:
    return [{"name": n, **v} for n, v in sorted(notification_config(call.cluster)["matcher"].items())]


@route("GET", "/cluster/notifications/matchers/{name}")
def matcher(call: Call) -> dict[str, Any]:
    cfg = notification_config(call.cluster)["matcher"]
    name = call.params["name"]
    if name not in cfg:
        raise ApiError(404, f"matcher '{name}' does not exist", newline=False)
    entry = {k: v for k, v in cfg[name].items() if k != "origin"}
    return {"name": name, **entry, "digest": render.digest_of(sorted(cfg.items()))}


@route("GET", "/cluster/notifications/targets")
def targets(call: Call) -> list[dict[str, Any]]:
    """Notifications.pm get_all_targets: every endpoint as a target (name, type, comment, origin, disable)."""
    cfg = notification_config(call.cluster)
    rows = []
    for kind in _ENDPOINT_TYPES:
        for name, v in sorted(cfg[kind].items()):
            row = {"name": name, "type": kind, "origin": v.get("origin", "user-created")}
            row.update({k: v[k] for k in ("comment", "disable") if k in v})
            rows.append(row)
    return rows


@route("GET", "/cluster/notifications/matcher-fields")
def matcher_fields(_call: Call) -> list[dict[str, str]]:
    """Notifications.pm get_matcher_fields: the metadata fields a matcher can match."""
    return [{"name": "type"}, {"name": "hostname"}, {"name": "job-id"}]


@route("GET", "/cluster/notifications/matcher-field-values")
def matcher_field_values(call: Call) -> list[dict[str, Any]]:
    """Notifications.pm get_matcher_field_values: the notification types, the backup jobs' ids (with Sys.Audit
    on /), the replication jobs the caller may see, and the nodes."""
    c = call.cluster
    rows: list[dict[str, Any]] = [
        {"value": t, "field": "type"} for t in ("package-updates", "fencing", "replication", "vzdump", "system-mail")
    ]
    if call.can("/", "Sys.Audit"):
        for backup in c.backup_jobs:
            extra = {"comment": backup["comment"]} if backup.get("comment") else {}
            rows.append({"value": backup["id"], "field": "job-id", **extra})
    for repl in sorted(c.replication.values(), key=lambda j: j.id):
        if call.can(f"/vms/{repl.guest}", "VM.Audit"):
            rows.append({"value": repl.id, "field": "job-id", **({"comment": repl.comment} if repl.comment else {})})
    rows += [{"value": n, "field": "hostname"} for n in c.nodes]
    return rows


# ---------------------------------------------------------------- resource mappings (API2/Cluster/Mapping/*.pm)


def _mapping_rows(call: Call, kind: str) -> list[dict[str, Any]]:
    """Each mapping of the kind the caller may see (Mapping.Audit, .Use or .Modify on /mapping/<kind>/<id>), with
    the file's digest, its description when set, and a node's checks with ``check-node``."""
    specs = call.cluster.options.get("mappings") or {}
    digest = render.digest_of(sorted(str(k) for k in specs))
    rows = []
    for name, spec in sorted(specs.items()):
        info = {"nodes": list(spec)} if isinstance(spec, list) else dict(spec)
        if info.get("type", "pci") != kind:
            continue
        path = f"/mapping/{kind}/{name}"
        if not any(call.can(path, p) for p in ("Mapping.Audit", "Mapping.Use", "Mapping.Modify")):
            continue
        what = "path=/srv/" + name if kind == "dir" else ("id=1234:5678" if kind == "usb" else "path=0000:41:00.0")
        row: dict[str, Any] = {"id": name, "map": [f"node={n},{what}" for n in info.get("nodes", [])], "digest": digest}
        if info.get("description"):
            row["description"] = info["description"]
        if kind == "pci" and info.get("live-migration-capable"):
            row["live-migration-capable"] = 1
        node = call.params.get("check-node")
        if node:
            missing = node not in info.get("nodes", [])
            checks = [{"severity": "warning", "message": f"No mapping for node {node}."}] if missing else []
            if kind == "usb":
                row["error"] = checks[0] if checks else None
            else:
                row["checks"] = checks
        rows.append(row)
    return rows


def _mapping_routes(kind: str) -> None:
    def index(call: Call) -> list[dict[str, Any]]:
        return _mapping_rows(call, kind)

    def read(call: Call) -> dict[str, Any]:
        """Mapping/<Kind>.pm get: the mapping's section ('mapping '<id>' not found')."""
        row = next((r for r in _mapping_rows(call, kind) if r["id"] == call.params["id"]), None)
        if row is None:
            raise ApiError(
                404, f"{kind.upper() if kind != 'dir' else 'Directory'} mapping '{call.params['id']}' not found"
            )
        return {k: v for k, v in row.items() if k not in ("checks", "error")}

    route("GET", f"/cluster/mapping/{kind}")(index)
    route("GET", f"/cluster/mapping/{kind}/{{id}}")(read)


for _kind in ("pci", "usb", "dir"):
    _mapping_routes(_kind)


# ---------------------------------------------------------------- jobs


def _realm_sync_rows(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    now = c.clock.now()
    rows = []
    for job in c.realm_sync:
        row = {"enabled": 1, **job}
        if int(row.get("enabled", 1)) and row.get("schedule"):
            nxt = calendar.next_events(calendar.parse(str(row["schedule"])), now, 1)
            if nxt:
                row["next-run"] = nxt[0]
        rows.append(row)
    return rows


@route("GET", "/cluster/jobs/realm-sync")
def realm_sync_index(call: Call) -> list[dict[str, Any]]:
    """Jobs/RealmSync.pm syncjob_index: jobs.cfg's realm-sync jobs the caller may see (Realm.AllocateUser or
    Sys.Audit on the realm), with their next run."""
    return [
        r
        for r in _realm_sync_rows(call)
        if call.can(f"/access/realm/{r.get('realm')}", "Realm.AllocateUser") or call.can("/", "Sys.Audit")
    ]


@route("GET", "/cluster/jobs/realm-sync/{id}")
def realm_sync_read(call: Call) -> dict[str, Any]:
    row = next((r for r in _realm_sync_rows(call) if r["id"] == call.params["id"]), None)
    if row is None:
        raise ApiError(500, f"job '{call.params['id']}' does not exist")
    return row


@route("GET", "/cluster/jobs/schedule-analyze")
def schedule_analyze(call: Call) -> list[dict[str, Any]]:
    """Jobs.pm schedule-analyze: the next ``iterations`` (10) events after ``starttime`` (now), each with the
    UTC time as Perl's scalar(gmtime()) writes it."""
    try:
        event = calendar.parse(str(call.params["schedule"]))
    except calendar.CalendarError as exc:
        raise ApiError(500, str(exc)) from None
    start = float(call.params.get("starttime", call.cluster.clock.now()))
    count = int(call.params.get("iterations", 10))
    return [
        {"timestamp": t, "utc": time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(t))}
        for t in calendar.next_events(event, start, count)
    ]


# ---------------------------------------------------------------- metrics


@route("GET", "/cluster/metrics/export")
def metrics_export(call: Call) -> dict[str, Any]:
    """MetricServer.pm export (PVE/PullMetric.pm): the node's and its guests' last metrics as gauges and
    derives; history is not kept here (the last generation only)."""
    c = call.cluster
    stamp = int(c.clock.now()) // 10 * 10
    wanted = [n for n in str(call.params.get("node-list", "")).split(",") if n] or list(c.nodes)
    data: list[dict[str, Any]] = []

    def gauge(ident: str, metric: str, value: float, kind: str = "gauge") -> None:
        data.append({"id": ident, "metric": metric, "timestamp": stamp, "type": kind, "value": value})

    used = c.mem_used_by_node()
    for n in c.nodes.values():
        if n.name not in wanted or not n.online:
            continue
        ident = f"node/{n.name}"
        gauge(ident, "uptime", n.uptime)
        gauge(ident, "cpu_current", n.cpu_usage)
        gauge(ident, "cpu_max", n.cpus)
        gauge(ident, "mem_total", n.memory_total)
        gauge(ident, "mem_used", used[n.name])
        gauge(ident, "disk_total", n.rootfs_total)
        gauge(ident, "disk_used", n.rootfs_used)
        gauge(ident, "net_in", 123_456_789, "derive")
        gauge(ident, "net_out", 98_765_432, "derive")
        for g in sorted(c.guests.values(), key=lambda g: g.vmid):
            if g.node != n.name:
                continue
            row = render.guest_runtime(c, g)
            gid = f"{g.type}/{g.vmid}"
            gauge(gid, "uptime", row["uptime"])
            gauge(gid, "cpu_max", row["cpus"])
            gauge(gid, "mem_total", row["maxmem"])
            gauge(gid, "disk_total", row["maxdisk"])
            if row["status"] == "running":
                gauge(gid, "cpu_current", row["cpu"])
                gauge(gid, "mem_used", row["mem"])
                for key in ("netin", "netout", "diskread", "diskwrite"):
                    gauge(
                        gid,
                        {"netin": "net_in", "netout": "net_out"}.get(key, key.replace("disk", "disk_")),
                        row[key],
                        "derive",
                    )
    return {"data": data}
