"""Node consistency checks (analysis/checks/node_consistency.py): the odd node is reported, not all."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.checks import node_consistency as ncs
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import NOW
from tests.unit.test_checks_node import cluster, codes, kernels

T = Thresholds()


def dns(dns1: str = "10.0.0.1", search: str = "lan") -> dict[str, Any]:
    return {"dns1": dns1, "search": search}


def tz(zone: str) -> dict[str, Any]:
    return {"time": int(NOW), "localtime": int(NOW), "timezone": zone}


def test_same_dns_and_zone_everywhere_is_no_finding() -> None:
    d = cluster(
        {
            "node_dns": {"pve1": dns(), "pve2": dns(), "pve3": dns()},
            "node_time": {n: tz("Europe/Berlin") for n in ("pve1", "pve2", "pve3")},
        }
    )
    assert ncs.dns_and_timezone(d, T) == []


def test_the_odd_node_differs_in_dns_and_zone() -> None:
    d = cluster(
        {
            "node_dns": {"pve1": dns(), "pve2": dns("8.8.8.8"), "pve3": dns()},
            "node_time": {"pve1": tz("Europe/Berlin"), "pve2": tz("Europe/Berlin"), "pve3": tz("UTC")},
        }
    )
    found = ncs.dns_and_timezone(d, T)
    assert codes(found) == [("NODE_DNS_DIFFERS", "pve2", "warning"), ("NODE_TIMEZONE_DIFFERS", "pve3", "warning")]
    assert found[0].evidence["value"] == {"dns1": "8.8.8.8", "search": "lan"}
    assert found[1].evidence["most_nodes"] == "Europe/Berlin"


def hosts(*extra: str) -> dict[str, Any]:
    lines = ["127.0.0.1 localhost.localdomain localhost", "10.0.0.11 pve1.lan pve1", "10.0.0.12 pve2.lan pve2"]
    return {"data": "\n".join([*lines, *extra, "# comment"]) + "\n", "digest": "0" * 40}


def installed(name: str, ip: str, *extra: str) -> dict[str, Any]:
    """/etc/hosts as pve-installer Proxmox/Install.pm writes it: localhost and the node's own name alone."""
    lines = ["127.0.0.1 localhost.localdomain localhost", f"{ip} {name}.lan {name}", *extra, "::1 ip6-localhost"]
    return {"data": "\n".join(lines) + "\n", "digest": "0" * 40}


def test_hosts_as_installed_differ_by_design_and_an_extra_name_is_no_conflict() -> None:
    """Every node's file has its own name alone (the installer; joining a cluster adds no line): no finding, nor
    for a line one node alone has."""
    per_node = {n: installed(n, f"10.0.0.1{i}") for i, n in enumerate(("pve1", "pve2", "pve3"), start=1)}
    assert ncs.hosts_differ(cluster({"node_hosts": per_node}), T) == []
    per_node["pve2"] = installed("pve2", "10.0.0.12", "10.0.0.99 old.lan old")
    assert ncs.hosts_differ(cluster({"node_hosts": per_node}), T) == []


def test_a_node_name_at_another_address_than_its_own_entry_is_a_conflict() -> None:
    """pve2 lists pve3 at its old address: pve3's own entry is the reference, whatever most nodes say."""
    per_node = {
        "pve1": installed("pve1", "10.0.0.11", "10.0.0.99 pve3.lan pve3"),
        "pve2": installed("pve2", "10.0.0.12", "10.0.0.11 pve1.lan pve1", "10.0.0.99 pve3.lan pve3"),
        "pve3": installed("pve3", "10.0.0.13"),
    }
    found = ncs.hosts_differ(cluster({"node_hosts": per_node}), T)
    assert codes(found) == [("NODE_HOSTS_DIFFERS", "pve1", "warning"), ("NODE_HOSTS_DIFFERS", "pve2", "warning")]
    assert found[1].evidence == {
        "names": {
            "pve3": {"here": ["10.0.0.99"], "elsewhere": ["10.0.0.13"]},
            "pve3.lan": {"here": ["10.0.0.99"], "elsewhere": ["10.0.0.13"]},
        }
    }


def test_a_shared_name_most_nodes_resolve_alike_is_the_reference() -> None:
    per_node = {
        "pve1": installed("pve1", "10.0.0.11", "10.0.0.50 pbs.lan pbs"),
        "pve2": installed("pve2", "10.0.0.12", "10.0.0.50 pbs.lan pbs"),
        "pve3": installed("pve3", "10.0.0.13", "10.0.0.51 PBS.lan pbs"),
    }
    found = ncs.hosts_differ(cluster({"node_hosts": per_node}), T)
    assert codes(found) == [("NODE_HOSTS_DIFFERS", "pve3", "warning")]
    assert set(found[0].evidence["names"]) == {"pbs", "pbs.lan"}


def test_hosts_equal_but_for_spacing_and_comments_is_no_finding() -> None:
    spaced = {
        "data": "127.0.0.1   localhost.localdomain localhost  # lo\n10.0.0.12 pve2.lan pve2\n10.0.0.11 pve1.lan pve1\n"
    }
    d = cluster({"node_hosts": {"pve1": hosts(), "pve2": spaced}})
    assert ncs.hosts_differ(d, T) == []


def test_partial_upgrade_is_found_on_the_odd_node_kernels_aside() -> None:
    same = kernels("6.14.11-4-pve", running="6.14.11-4-pve")
    older = [dict(p, Version="9.0.11") if p["Package"] == "pve-manager" else p for p in same]
    other_kernels = kernels("6.14.11-5-pve", "6.14.11-4-pve", running="6.14.11-4-pve")
    d = cluster({"apt_versions": {"pve1": same, "pve2": older, "pve3": other_kernels}})
    found = ncs.packages_differ(d, T)
    assert codes(found) == [("NODE_PACKAGES_DIFFER", "pve2", "warning")]
    assert found[0].evidence["packages"] == {"pve-manager": {"version": "9.0.11", "most_nodes": "9.1.2"}}


def test_one_node_has_nothing_to_compare_with() -> None:
    d = cluster({"node_dns": {"pve1": dns("8.8.8.8")}, "apt_versions": {"pve1": kernels(running="x")}})
    assert ncs.dns_and_timezone(d, T) == [] and ncs.packages_differ(d, T) == []


def repos(*proxmox: tuple[str, str, int]) -> dict[str, Any]:
    """/apt/repositories as proxmox-apt answers it: Debian's own file, then the Proxmox one."""

    def repo(uri: str, suite: str, comp: str, enabled: int) -> dict[str, Any]:
        return {
            "Types": ["deb"],
            "URIs": [uri],
            "Suites": [suite],
            "Components": [comp],
            "FileType": "sources",
            "Enabled": enabled,
        }

    files = [
        {
            "path": "/etc/apt/sources.list.d/debian.sources",
            "file-type": "sources",
            "repositories": [repo("http://deb.debian.org/debian", "trixie", "main", 1)],
            "digest": [0] * 32,
        },
        {
            "path": "/etc/apt/sources.list.d/proxmox.sources",
            "file-type": "sources",
            "repositories": [repo(u, "trixie", c, e) for u, c, e in proxmox],
            "digest": [0] * 32,
        },
    ]
    return {"files": files, "errors": [], "infos": [], "standard-repos": [], "digest": "0" * 64}


NOSUB = ("http://download.proxmox.com/debian/pve", "pve-no-subscription", 1)
ENTERPRISE = ("https://enterprise.proxmox.com/debian/pve", "pve-enterprise", 1)


def test_same_enabled_sources_everywhere_is_no_finding() -> None:
    disabled_extra = (*ENTERPRISE[:2], 0)  # present but disabled on one node: apt does not use it
    d = cluster({"apt_repositories": {"pve1": repos(NOSUB), "pve2": repos(NOSUB, disabled_extra)}})
    assert ncs.apt_sources_differ(d, T) == []


def test_node_on_another_repository() -> None:
    d = cluster({"apt_repositories": {"pve1": repos(NOSUB), "pve2": repos(ENTERPRISE), "pve3": repos(NOSUB)}})
    found = ncs.apt_sources_differ(d, T)
    assert codes(found) == [("NODE_APT_SOURCES_DIFFER", "pve2", "warning")]
    assert found[0].evidence == {
        "only_here": ["https://enterprise.proxmox.com/debian/pve trixie pve-enterprise"],
        "missing_here": ["http://download.proxmox.com/debian/pve trixie pve-no-subscription"],
    }
