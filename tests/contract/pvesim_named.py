"""Values of the less common path parameters, from a built cluster (see pvesim_calls)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pvesim.api import clusterconf
from pvesim.state import Cluster


def _node(c: Cluster, bound: dict[str, str]) -> Any:
    return c.nodes.get(bound.get("node", ""))


def _fw_conf(c: Cluster, template: str, bound: dict[str, str]) -> Any:
    if "/qemu/" in template or "/lxc/" in template:
        return c.firewall.guest(int(bound.get("vmid", 0)))
    return c.firewall.cluster


def volumes(c: Cluster, bound: dict[str, str], content: str | None = None) -> list[str]:
    """Volumes on the bound storage (any storage without one) as the node sees them: backups, ISOs and other
    volumes, then guest disks."""
    sid, node = bound.get("storage"), bound.get("node")
    out = [
        v.volid
        for v in c.volumes
        if (sid is None or v.storage == sid) and v.node in (None, node) and content in (None, v.content)
    ]
    if content in (None, "images"):
        for g in sorted(c.guests.values(), key=lambda g: g.vmid):
            out += [volid for _key, volid, _opts in g.volumes() if sid is None or volid.startswith(f"{sid}:")]
    return out


def _ids(c: Cluster, template: str, bound: dict[str, str]) -> Iterator[str]:
    if "replication" in template:
        yield from sorted(c.replication)
    elif template.startswith("/cluster/backup/"):
        yield from (str(j["id"]) for j in c.backup_jobs)
    elif template.startswith("/cluster/metrics/server/"):
        yield from (str(m["id"]) for m in c.metric_servers)
    elif template.startswith("/access/tfa/"):
        user = c.access.users.get(bound.get("userid", ""))
        yield from (str(e["id"]) for e in (user.tfa if user else []))
    elif template.startswith("/cluster/mapping/"):
        kind = template.split("/")[3]
        specs = c.options.get("mappings") or {}
        yield from sorted(
            n for n, s in specs.items() if (s.get("type", "pci") if isinstance(s, dict) else "pci") == kind
        )
    elif template.startswith("/cluster/acme/plugins/"):
        yield from sorted(clusterconf.plugins(c))
    elif template.startswith("/cluster/jobs/realm-sync/"):
        yield from sorted(str(j["id"]) for j in c.realm_sync)
    elif template.startswith("/cluster/sdn/fabrics/fabric/") and c.sdn:
        yield from sorted(c.sdn.fabrics)


def _names(c: Cluster, template: str, bound: dict[str, str]) -> Iterator[str]:
    if "/disks/zfs/" in template:
        node = _node(c, bound)
        yield from (str(p["name"]) for p in (node.zfs if node else []))
    elif "/ceph/pool/" in template:
        yield from sorted(c.ceph.pools) if c.ceph else ()
    elif "/firewall/aliases/" in template:
        yield from (a["name"] for a in _fw_conf(c, template, bound).aliases.values())
    elif "/firewall/ipset/" in template:
        yield from sorted(_fw_conf(c, template, bound).ipsets)
    elif template.startswith("/cluster/acme/account/"):
        yield from clusterconf.accounts(c)
    elif template.startswith("/cluster/notifications/"):
        kind = template.split("/")[-2]
        yield from sorted(clusterconf.notification_config(c)["matcher" if kind == "matchers" else kind])


def values(c: Cluster, template: str, name: str, bound: dict[str, str]) -> Iterator[str]:
    sdn = c.sdn
    simple: dict[str, Any] = {
        "flag": lambda: ["noout", "noscrub"],
        "sid": lambda: sorted(c.ha_resources),
        "zone": lambda: sorted(sdn.zones) if sdn else [],
        "vnet": lambda: sorted(sdn.vnets) if sdn else [],
        "controller": lambda: sorted(sdn.controllers) if sdn else [],
        "fabric": lambda: sorted(sdn.fabrics) if sdn else [],
        "fabric_id": lambda: sorted(sdn.fabrics) if sdn else [],
        "node_id": lambda: sorted(sdn.fabrics[bound["fabric_id"]].nodes) if sdn and bound.get("fabric_id") else [],
        "ipam": lambda: sorted(getattr(sdn, "ipams", {}) or {}) if sdn else ["pve"],
        "dns": lambda: sorted(getattr(sdn, "dns", {}) or {}) if sdn else [],
        "subnet": lambda: sorted(s.id for s in sdn.subnets.values() if s.vnet == bound.get("vnet")) if sdn else [],
        "group": lambda: sorted(c.firewall.groups) if "/firewall/" in template else sorted(c.ha_groups),
        "rule": lambda: sorted(c.ha_rules),
        "realm": lambda: [str(d["realm"]) for d in c.access.domains],
        "userid": lambda: sorted(c.access.users),
        "groupid": lambda: sorted(c.access.groups),
        "roleid": lambda: ["PVEAuditor", "Administrator", *sorted(set(c.access.roles) - c.access.builtin)],
        "tokenid": lambda: (
            sorted(c.access.users[bound["userid"]].tokens) if bound.get("userid") in c.access.users else []
        ),
        "poolid": lambda: sorted(set(c.access.pools) | {g.pool for g in c.guests.values() if g.pool}),
        "pos": lambda: ["0", "1"],
        "iface": lambda: sorted(_node(c, bound).health.network) if _node(c, bound) else [],
        "service": lambda: ["pveproxy", "chrony", "corosync"],
        "osdid": lambda: [str(i) for i in sorted(c.ceph.osds)] if c.ceph else [],
        "pci-id-or-mapping": lambda: ["0000:00:02.0", "0000:41:00.0"],
        "cidr": lambda: [str(e["cidr"]) for e in _fw_conf(c, template, bound).ipsets.get(bound.get("name", ""), [])],
        "volume": lambda: volumes(c, bound),
    }
    if name == "id":
        yield from _ids(c, template, bound)
    elif name == "name":
        yield from _names(c, template, bound)
    elif name in simple:
        yield from simple[name]()
