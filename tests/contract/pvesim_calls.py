"""Concrete GET calls for every route of PVE's schema, on a built scenario: the paths (path parameters from the
cluster's own objects) and the required query parameters. The contract tests send them in process through
pvesim's pipeline: every answer must follow the schema, and the fields the answers carry are counted against
the schema's ``returns`` (the field-coverage figure)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pvesim.apischema import ApiSchema
from pvesim.state import Cluster

# required query parameters the schema gives no enum for: a value that makes sense on the built-in scenarios
QUERY_VALUES: dict[str, str] = {
    "disk": "/dev/sda",
    "service": "osd",
    "id": "0",
    "action": "stop",
    "timeframe": "day",
    "cf": "AVERAGE",
    "ds": "cpu",
    "type": "vm",
    "url": "http://download.proxmox.com/iso/x.iso",
    "reference": "docker.io/library/debian",
    "volume": "pbs-main:backup/vm/100/2026-12-01T21:00:00Z",
    "filepath": "/",
    "schedule": "*/15",
    "server": "10.0.0.60",
    "portal": "10.0.0.60",
    "datastore": "main",
    "username": "root@pam",
    "password": "secret",
    "vncticket": "PVEVNC:00000000::invalid",
    "port": "5900",
    "command": "ping",
    "file": "/etc/hostname",
    "pid": "1234",
    "node": "pve1",
    "upid": "UPID:pve1:00000001:00000001:00000001:x::root@pam:",
    "key": "global",
    "config-keys": "global:fsid",
    "field": "type",
    "guest": "qemu",
    "vmid": "100",
    "vgname": "pve",
    "vg": "pve",
    "name": "pve-manager",
    "prefix": "10.0.0.0/24",
    "storage": "local",
    "domain": "pve1.example.com",
    "directory": "https://acme-staging-v02.api.letsencrypt.org/directory",
}
MAX_PER_TEMPLATE = 3


def _first_node(c: Cluster, bound: dict[str, str]) -> str | None:
    return next((n.name for n in c.nodes.values() if n.online), None)


def _first_snapshot(c: Cluster, bound: dict[str, str]) -> str | None:
    g = c.guests.get(int(bound.get("vmid", 0)))
    return next(iter(g.snapshots), None) if g else None


# optional query parameters that change what an answer carries (full lists, pending views, checks): each
# variant is sent besides the plain call; a callable value is computed from the cluster and the bound path
# parameters (no call when it gives None)
VARIANTS: dict[str, list[dict[str, Any]]] = {
    **{
        f"/cluster/sdn/{kind}{item}": [{"pending": "1"}, {"running": "1"}]
        for kind, key in (("zones", "zone"), ("vnets", "vnet"), ("controllers", "controller"))
        for item in ("", f"/{{{key}}}")
    },
    "/nodes/{node}/qemu": [{"full": "1"}],
    "/access/users": [{"full": "1"}],
    **{f"/cluster/mapping/{kind}": [{"check-node": _first_node}] for kind in ("pci", "usb", "dir")},
    "/nodes/{node}/qemu/{vmid}/config": [{"current": "1"}, {"snapshot": _first_snapshot}],
    "/nodes/{node}/lxc/{vmid}/config": [{"current": "1"}, {"snapshot": _first_snapshot}],
    "/nodes/{node}/storage": [{"format": "1"}],
    "/nodes/{node}/disks/list": [{"include-partitions": "1"}],
    "/nodes/{node}/ceph/pool/{name}/status": [{"verbose": "1"}],
    "/nodes/{node}/qemu/{vmid}/agent/file-read": [{"file": "/var/log/syslog"}],
}


def _candidates(c: Cluster, template: str, name: str, bound: dict[str, str]) -> list[str]:
    """Values of one path parameter, consistent with those already bound (a guest on its node, ...)."""
    node = bound.get("node")
    if name == "node":
        return [n.name for n in c.nodes.values() if n.online]
    if name == "vmid":
        kind = "lxc" if "/lxc/" in template else "qemu"
        return [
            str(g.vmid) for g in sorted(c.guests.values(), key=lambda g: g.vmid) if g.type == kind and g.node == node
        ]
    if name == "storage":
        found = [s for s in c.storages.values() if node is None or s.available_on(node)]
        if "/file-restore/" in template:  # only PBS storages offer it
            found = [s for s in found if s.type == "pbs"]
        elif template.endswith("/import-metadata"):
            found = [s for s in found if "import" in s.content]
        return [s.storage for s in found]
    if name == "upid":
        return [t.upid for t in c.tasks if t.node == node]
    if name == "snapname":
        g = c.guests.get(int(bound.get("vmid", 0)))
        return list(g.snapshots) if g else []
    return list(_named(c, template, name, bound))


def _named(c: Cluster, template: str, name: str, bound: dict[str, str]) -> Iterator[str]:
    from tests.contract import pvesim_named

    yield from pvesim_named.values(c, template, name, bound)


def calls(c: Cluster, schema: ApiSchema, template: str) -> list[tuple[str, dict[str, str]]]:
    """Up to MAX_PER_TEMPLATE (path, query) pairs for a GET template on this cluster; none when the cluster has
    nothing to name (no snapshot, no such object)."""
    names = re.findall(r"\{([^}]+)\}", template)
    bindings: list[dict[str, str]] = [{}]
    for name in names:
        grown: list[tuple[int, dict[str, str]]] = []
        for bound in bindings:
            for rank, value in enumerate(_candidates(c, template, name, bound)[:MAX_PER_TEMPLATE]):
                grown.append((rank, {**bound, name: value}))
        bindings = [b for _rank, b in grown][: MAX_PER_TEMPLATE * 2]
        # and the first value under each binding before any second one: a guest on each node, not only the
        # guests of the first node
        diverse = [b for _rank, b in sorted(grown, key=lambda rb: rb[0])][:MAX_PER_TEMPLATE]
        bindings = bindings[:MAX_PER_TEMPLATE] + [b for b in diverse if b not in bindings[:MAX_PER_TEMPLATE]]
    spec = schema.methods[("GET", template)]
    required = [
        (pname, prop) for pname, prop in spec.properties.items() if not prop.get("optional") and pname not in names
    ]
    out = []
    for bound in bindings:
        path = re.sub(r"\{([^}]+)\}", lambda m, b=bound: b[m.group(1)], template)  # type: ignore[misc]
        query = {pname: _query_value(c, template, pname, prop, bound) for pname, prop in required}
        out.append((path, dict(query)))
        for variant in VARIANTS.get(template, []):
            extra = {k: v(c, bound) if callable(v) else v for k, v in variant.items()}
            if all(v is not None for v in extra.values()):
                out.append((path, {**query, **extra}))
    return out


def _query_value(c: Cluster, template: str, pname: str, prop: dict[str, Any], bound: dict[str, str]) -> str:
    if "enum" in prop:
        return str(prop["enum"][0])
    if pname in ("server", "portal") and "/scan/" in template:  # a server the cluster's storages use
        kind = template.rsplit("/", 1)[-1]
        kinds = ("iscsi", "iscsidirect") if kind == "iscsi" else (kind,)
        found = [str(s.options[pname]) for s in c.storages.values() if s.type in kinds and pname in s.options]
        if found:
            return found[0]
    if pname == "pid" and template.endswith("/agent/exec-status"):  # a process the guest's agent started
        g = c.guests.get(int(bound.get("vmid", 0)))
        runs = (g.agent_data.get("exec") if g else None) or {}
        if runs:
            return str(next(iter(runs)))
    if pname == "volume":  # a volume the call can work on: an import for import-metadata, else a backup
        from tests.contract import pvesim_named

        content = "import" if template.endswith("/import-metadata") else "backup"
        found = pvesim_named.volumes(c, bound, content) or pvesim_named.volumes(c, {}, content)
        if found:
            return found[0]
    return QUERY_VALUES.get(pname, "1")


def documented(returns: dict[str, Any], prefix: str = "") -> set[str]:
    """The field names a ``returns`` schema documents, nested objects and arrays of objects as dotted paths."""
    out: set[str] = set()
    if returns.get("type") == "array" or "items" in returns:
        items = returns.get("items") or {}
        if isinstance(items, dict) and items.get("properties"):
            return documented(items, prefix)
        return out
    for pname, prop in (returns.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        if pname.startswith("{"):  # a map: "{id}" stands for every key
            out |= documented(prop, f"{prefix}*.")
            continue
        out.add(prefix + pname)
        if prop.get("properties") or (prop.get("items") or {}).get("properties"):
            out |= documented(prop, f"{prefix}{pname}.")
    return out


def present(data: Any, returns: dict[str, Any], prefix: str = "") -> set[str]:
    """The documented fields an answer carries (walking the schema alongside the data)."""
    out: set[str] = set()
    if isinstance(data, list):
        items = returns.get("items") or {}
        if isinstance(items, dict) and items.get("properties"):
            for row in data:
                out |= present(row, items, prefix)
        return out
    if not isinstance(data, dict):
        return out
    if not returns.get("properties") and isinstance(returns.get("items"), dict):
        returns = returns["items"]  # an object documented with 'items' (Ceph/OSD.pm index), as documented() reads it
    for pname, prop in (returns.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        if pname.startswith("{"):
            for value in data.values():
                out |= present(value, prop, f"{prefix}*.")
            continue
        if pname.endswith("[n]"):  # an indexed key: scsi[n] stands for scsi0, scsi1, ...
            stem = pname[:-3]
            if any(k.startswith(stem) and k[len(stem) :].isdecimal() for k in data):
                out.add(prefix + pname)
            continue
        if pname not in data:
            continue
        value = data[pname]
        props = prop.get("properties") or {}
        mapped = any(k.startswith("{") for k in props)
        per_entry = (
            isinstance(value, dict)
            and value
            and props
            and not mapped
            and not set(props) & set(value)
            and all(isinstance(v, dict) for v in value.values())
        )
        if per_entry:  # documented per entry, sent as a map (qemu-server migrate's not_allowed_nodes: node -> it)
            out.add(prefix + pname)
            for v in value.values():
                out |= present(v, prop, f"{prefix}{pname}.")
            continue
        out.add(prefix + pname)
        if prop.get("properties") or (prop.get("items") or {}).get("properties"):
            out |= present(data[pname], prop, f"{prefix}{pname}.")
    return out
