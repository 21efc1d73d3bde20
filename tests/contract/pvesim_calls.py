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
    "prefix": "10.0.0.0/24",
    "storage": "local",
    "domain": "pve1.example.com",
    "directory": "https://acme-staging-v02.api.letsencrypt.org/directory",
}
MAX_PER_TEMPLATE = 3


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
        return [s.storage for s in c.storages.values() if node is None or s.available_on(node)]
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
        grown = []
        for bound in bindings:
            for value in _candidates(c, template, name, bound)[:MAX_PER_TEMPLATE]:
                grown.append({**bound, name: value})
        bindings = grown[: MAX_PER_TEMPLATE * 2]
    spec = schema.methods[("GET", template)]
    query = {
        pname: str(prop["enum"][0]) if "enum" in prop else QUERY_VALUES.get(pname, "1")
        for pname, prop in spec.properties.items()
        if not prop.get("optional") and pname not in names
    }
    out = []
    for bound in bindings[:MAX_PER_TEMPLATE]:
        path = re.sub(r"\{([^}]+)\}", lambda m, b=bound: b[m.group(1)], template)  # type: ignore[misc]
        out.append((path, dict(query)))
    return out


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
    for pname, prop in (returns.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        if pname.startswith("{"):
            for value in data.values():
                out |= present(value, prop, f"{prefix}*.")
            continue
        if pname not in data:
            continue
        out.add(prefix + pname)
        if prop.get("properties") or (prop.get("items") or {}).get("properties"):
            out |= present(data[pname], prop, f"{prefix}{pname}.")
    return out
