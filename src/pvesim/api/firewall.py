"""Firewall reads (pve-firewall API2/Firewall/Cluster.pm and Host.pm ``get_options``, Rules.pm ``get_rules``);
the schema's permission checks (Sys.Audit on / or /nodes/{node}) are enforced by the request pipeline."""

from __future__ import annotations

import hashlib
from typing import Any

from pvesim.api.registry import Call, route
from pvesim.firewall import rule_errors


def _with_digest(options: dict[str, Any]) -> dict[str, Any]:
    """Firewall.pm copy_opject_with_digest: the set options plus the sha1 of their ``key:value`` lines."""
    sha = hashlib.sha1()  # PVE's digest, not a security measure
    out = {k: options[k] for k in sorted(options) if options[k] is not None}
    for k, v in out.items():
        sha.update(f"{k}:{v}\n".encode())
    return {**out, "digest": sha.hexdigest()}


@route("GET", "/cluster/firewall/options")
def cluster_options(call: Call) -> dict[str, Any]:
    return _with_digest(call.cluster.firewall.options)


@route("GET", "/cluster/firewall/rules")
def cluster_rules(call: Call) -> list[dict[str, Any]]:
    """Each rule with its position, the ``errors`` verify_rule found and the list's digest, as
    copy_list_with_digest builds them (the digest hashes every scalar field of every rule)."""
    fw = call.cluster.firewall
    out = []
    sha = hashlib.sha1()  # PVE's digest, not a security measure
    for rule in fw.rules:
        errors = rule_errors(rule, fw)
        row = {**rule, **({"errors": errors} if errors else {})}
        for k in sorted(row):
            if not isinstance(row[k], dict | list):
                sha.update(f"{k}:{row[k]}\n".encode())
        out.append(row)
    digest = sha.hexdigest()
    return [{**row, "digest": digest, "pos": pos} for pos, row in enumerate(out)]


@route("GET", "/nodes/{node}/firewall/options")
def node_options(call: Call) -> dict[str, Any]:
    return _with_digest(call.cluster.firewall.host_options.get(call.params["node"], {}))
