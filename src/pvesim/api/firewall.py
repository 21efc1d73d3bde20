"""Firewall reads (pve-firewall src/PVE/API2/Firewall/*.pm): options, rules, aliases, IPSets and references of
the cluster (cluster.fw), of each node (host.fw) and of each guest (<vmid>.fw), security groups and macros.
The schema's permission checks (Sys.Audit on / or /nodes/{node}, VM.Audit on /vms/{vmid}) are enforced by the
request pipeline; the guest need not exist (the handlers read only the .fw file, which may be missing)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from pvesim.api.registry import ApiError, Call, route
from pvesim.firewall import FwConf, rule_errors, rule_ipversion
from pvesim.fwmacros import MACROS


def with_digest(options: dict[str, Any]) -> dict[str, Any]:
    """Firewall.pm copy_opject_with_digest: the set options plus the sha1 of their ``key:value`` lines."""
    sha = hashlib.sha1(usedforsecurity=False)
    out = {k: options[k] for k in sorted(options) if options[k] is not None}
    for k, v in out.items():
        sha.update(f"{k}:{v}\n".encode())
    return {**out, "digest": sha.hexdigest()}


def list_with_digest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Firewall.pm copy_list_with_digest: every row, and on each the digest of every row's scalar fields."""
    sha = hashlib.sha1(usedforsecurity=False)
    out = []
    for row in rows:
        data = {k: row[k] for k in sorted(row) if row[k] is not None}
        for k, v in data.items():
            if not isinstance(v, dict | list):
                sha.update(f"{k}:{v}\n".encode())
        out.append(data)
    digest = sha.hexdigest()
    return [{**row, "digest": digest} for row in out]


def _rules(call: Call, rules: list[dict[str, Any]], local: FwConf | None) -> list[dict[str, Any]]:
    """Rules.pm get_rules: the parsed rules (``verify_rule`` added ``ipversion`` and ``errors``) with digest and
    position."""
    fw = call.cluster.firewall
    rows = []
    for rule in rules:
        row = dict(rule)
        version = rule_ipversion(rule, fw, local)
        if version:
            row["ipversion"] = version
        errors = rule_errors(rule, fw, local)
        if errors:
            row["errors"] = errors
        rows.append(row)
    return [{**row, "pos": pos} for pos, row in enumerate(list_with_digest(rows))]


def _rule_at(rows: list[dict[str, Any]], pos: int) -> dict[str, Any]:
    """Rules.pm get_rule: 'no rule at position <pos>'."""
    if pos >= len(rows):
        raise ApiError(500, f"no rule at position {pos}")
    return rows[pos]


def _aliases(conf: FwConf) -> list[dict[str, Any]]:
    """Aliases.pm get_aliases: sorted by (lower-cased) name, with the list's digest."""
    return list_with_digest([conf.aliases[k] for k in sorted(conf.aliases)])


def _alias(conf: FwConf, name: str) -> dict[str, Any]:
    """Aliases.pm read_alias: the alias as parsed (no digest); 400 'no such alias'."""
    entry = conf.aliases.get(name.lower())
    if entry is None:
        raise ApiError(400, "Parameter verification failed.", {"name": "no such alias"})
    return dict(entry)


def _named(key: str, names: Iterable[str], comments: dict[str, str]) -> list[dict[str, Any]]:
    """Name (and comment, where set) of each, sorted, with the list's digest: how PVE lists IPSets and groups."""
    rows = []
    for name in sorted(names):
        row: dict[str, Any] = {key: name}
        if comments.get(name):
            row["comment"] = comments[name]
        rows.append(row)
    return list_with_digest(rows)


def _ipset_list(conf: FwConf) -> list[dict[str, Any]]:
    """IPSet.pm $get_ipset_list: name (and comment) of every IPSet, sorted, with the list's digest."""
    return _named("name", conf.ipsets, conf.ipset_comments)


def _ipset(conf: FwConf, name: str) -> list[dict[str, Any]]:
    """IPSet.pm get_ipset: the members with the list's digest; 'no such IPSet' for an unknown name."""
    if name not in conf.ipsets:
        raise ApiError(500, f"no such IPSet '{name}'")
    return list_with_digest(conf.ipsets[name])


def _ipset_entry(conf: FwConf, name: str, cidr: str) -> dict[str, Any]:
    for entry in _ipset(conf, name):
        if entry["cidr"] == cidr:
            return entry
    raise ApiError(400, "Parameter verification failed.", {"cidr": "no such IP/Network"})


def _refs(call: Call, scoped: list[tuple[FwConf, str]]) -> list[dict[str, Any]]:
    """Firewall/Helpers.pm collect_refs per file: IPSets then aliases of each scope, filtered by ``type``."""
    kind = call.params.get("type")
    rows: list[dict[str, Any]] = []
    for conf, scope in scoped:
        if kind in (None, "ipset"):
            for name in conf.ipsets:
                row: dict[str, Any] = {"type": "ipset", "name": name, "ref": f"+{name}", "scope": scope}
                if conf.ipset_comments.get(name):
                    row["comment"] = conf.ipset_comments[name]
                rows.append(row)
        if kind in (None, "alias"):
            for key, alias in conf.aliases.items():
                row = {"type": "alias", "name": key, "ref": key, "scope": scope}
                if alias.get("comment"):
                    row["comment"] = alias["comment"]
                rows.append(row)
    return rows


# ---------------------------------------------------------------- the cluster (API2/Firewall/Cluster.pm)


def _cluster(call: Call) -> FwConf:
    return call.cluster.firewall.cluster


@route("GET", "/cluster/firewall/options")
def cluster_options(call: Call) -> dict[str, Any]:
    return with_digest(_cluster(call).options)


@route("GET", "/cluster/firewall/rules")
def cluster_rules(call: Call) -> list[dict[str, Any]]:
    return _rules(call, _cluster(call).rules, None)


@route("GET", "/cluster/firewall/rules/{pos}")
def cluster_rule(call: Call) -> dict[str, Any]:
    return _rule_at(cluster_rules(call), int(call.params["pos"]))


@route("GET", "/cluster/firewall/aliases")
def cluster_aliases(call: Call) -> list[dict[str, Any]]:
    return _aliases(_cluster(call))


@route("GET", "/cluster/firewall/aliases/{name}")
def cluster_alias(call: Call) -> dict[str, Any]:
    return _alias(_cluster(call), call.params["name"])


@route("GET", "/cluster/firewall/ipset")
def cluster_ipsets(call: Call) -> list[dict[str, Any]]:
    return _ipset_list(_cluster(call))


@route("GET", "/cluster/firewall/ipset/{name}")
def cluster_ipset(call: Call) -> list[dict[str, Any]]:
    return _ipset(_cluster(call), call.params["name"])


@route("GET", "/cluster/firewall/ipset/{name}/{cidr}")
def cluster_ipset_entry(call: Call) -> dict[str, Any]:
    return _ipset_entry(_cluster(call), call.params["name"], call.params["cidr"])


@route("GET", "/cluster/firewall/groups")
def groups(call: Call) -> list[dict[str, Any]]:
    """Groups.pm $get_security_group_list: name (and comment) of every group, sorted, with the digest."""
    fw = call.cluster.firewall
    return _named("group", fw.groups, fw.group_comments)


def _group(call: Call) -> list[dict[str, Any]]:
    """GroupRules load_config: 'no such security group'."""
    name = call.params["group"]
    rules = call.cluster.firewall.groups.get(name)
    if rules is None:
        raise ApiError(500, f"no such security group '{name}'")
    return _rules(call, rules, None)


@route("GET", "/cluster/firewall/groups/{group}")
def group_rules(call: Call) -> list[dict[str, Any]]:
    return _group(call)


@route("GET", "/cluster/firewall/groups/{group}/{pos}")
def group_rule(call: Call) -> dict[str, Any]:
    return _rule_at(_group(call), int(call.params["pos"]))


@route("GET", "/cluster/firewall/macros")
def macros(_call: Call) -> list[dict[str, str]]:
    """Cluster.pm get_macros: every macro and its description (PVE's order is a hash's; here by name)."""
    return [{"macro": name, "descr": descr or name} for name, descr in sorted(MACROS.items())]


@route("GET", "/cluster/firewall/refs")
def cluster_refs(call: Call) -> list[dict[str, Any]]:
    """Cluster.pm refs: the SDN's IPSets (none here: no vnet subnets in the firewall's view), then cluster.fw's."""
    return _refs(call, [(_cluster(call), "dc")])


# ---------------------------------------------------------------- a node (API2/Firewall/Host.pm)


def _host(call: Call) -> FwConf:
    return call.cluster.firewall.host(call.params["node"])


@route("GET", "/nodes/{node}/firewall/options")
def node_options(call: Call) -> dict[str, Any]:
    return with_digest(_host(call).options)


@route("GET", "/nodes/{node}/firewall/rules")
def node_rules(call: Call) -> list[dict[str, Any]]:
    return _rules(call, _host(call).rules, _host(call))


@route("GET", "/nodes/{node}/firewall/rules/{pos}")
def node_rule(call: Call) -> dict[str, Any]:
    return _rule_at(node_rules(call), int(call.params["pos"]))


# ---------------------------------------------------------------- a guest (API2/Firewall/VM.pm, for qemu and lxc)


def _guest(call: Call) -> FwConf:
    return call.cluster.firewall.guest(int(call.params["vmid"]))


def _guest_routes(kind: str) -> None:
    base = f"/nodes/{{node}}/{kind}/{{vmid}}/firewall"
    reads: dict[str, Callable[[Call], Any]] = {
        "/options": lambda call: with_digest(_guest(call).options),
        "/rules": lambda call: _rules(call, _guest(call).rules, _guest(call)),
        "/rules/{pos}": lambda call: _rule_at(_rules(call, _guest(call).rules, _guest(call)), int(call.params["pos"])),
        "/aliases": lambda call: _aliases(_guest(call)),
        "/aliases/{name}": lambda call: _alias(_guest(call), call.params["name"]),
        "/ipset": lambda call: _ipset_list(_guest(call)),
        "/ipset/{name}": lambda call: _ipset(_guest(call), call.params["name"]),
        "/ipset/{name}/{cidr}": lambda call: _ipset_entry(_guest(call), call.params["name"], call.params["cidr"]),
        # VM.pm refs: cluster.fw's ('dc'), the SDN's, the guest's own ('guest')
        "/refs": lambda call: _refs(call, [(_cluster(call), "dc"), (_guest(call), "guest")]),
    }
    for suffix, handler in reads.items():
        route("GET", base + suffix)(handler)


_guest_routes("qemu")
_guest_routes("lxc")
