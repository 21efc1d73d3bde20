"""The access, firewall and cluster configuration checks through the real MCP client against pvesim: the
demo's planted problems are found, and a token that cannot see a list gets CHECK_SKIPPED naming the
privilege, never a clean bill."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

import pvesim
from pvesim.scenario import DEFAULT_TOKENS
from pvesim.server import SimServer
from tests.integration.conftest import scenario_with_limited_token
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio


async def _health(mcp: Any, areas: list[str]) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("check_cluster_health", {"detail": True, "areas": areas, "limit": 1000})
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


def _found(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["code"], f["subject"]["id"]) for f in report["findings"]}


async def test_demo_access_problems_are_found(demo_sim: SimServer, server_for: Any) -> None:
    report = await _health(server_for(demo_sim), ["access"])
    found = _found(report)
    assert found >= {
        ("ACCESS_ROOT_NO_TFA", "root@pam"),
        ("ACCESS_GROUP_ADMIN_NO_TFA", "bob@pve"),
        ("ACCESS_ADMIN_AT_ROOT", "/:user:carol@pve"),
        ("ACCESS_DISABLED_USER_TOKEN", "dave@pve!backup"),
        ("ACCESS_GROUP_EMPTY", "contractors"),
        ("ACCESS_ROLE_UNUSED", "LegacyAudit"),
        ("ACCESS_REALM_NO_TFA", "corp"),
        ("POOL_EMPTY", "archive"),
    }, found
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "alice@pve") not in found  # alice has TOTP
    assert ("ACCESS_ROLE_UNUSED", "HAOperator") not in found  # the operator token's ACL uses it
    assert report["complete"] is True and not any(f["code"] == "CHECK_SKIPPED" for f in report["findings"])
    root = next(f for f in report["findings"] if f["code"] == "ACCESS_ROOT_NO_TFA")
    assert root["severity"] == "critical" and "Two Factor" in root["remediation"]


async def test_demo_firewall_problems_are_found(demo_sim: SimServer, server_for: Any) -> None:
    report = await _health(server_for(demo_sim), ["firewall"])
    found = _found(report)
    assert found == {("FIREWALL_RULE_ANY_ADDRESS", "cluster/1"), ("FIREWALL_NODE_DISABLED", "pve3")}, found
    rule = next(f for f in report["findings"] if f["code"] == "FIREWALL_RULE_ANY_ADDRESS")
    assert rule["evidence"]["source"] == "0.0.0.0/0" and rule["evidence"]["dport"] == "8006"


async def test_cluster_log_needs_sys_syslog_and_is_read_with_it(demo_sim: SimServer, server_for: Any) -> None:
    auditor = await _health(server_for(demo_sim), ["cluster"])
    skipped = [f for f in auditor["findings"] if f["code"] == "CHECK_SKIPPED"]
    assert [f["subject"]["id"] for f in skipped] == ["/cluster/log"]
    assert "Sys.Syslog on /" in skipped[0]["message"]
    assert "CLUSTER_LOG_ERRORS" not in {f["code"] for f in auditor["findings"]}
    assert ("METRICS_NONE", "cluster") in _found(auditor)
    root = await _health(server_for(demo_sim, "root@pam!pvesim"), ["cluster"])
    errors = next(f for f in root["findings"] if f["code"] == "CLUSTER_LOG_ERRORS")
    assert errors["evidence"]["errors"] == 14 and errors["evidence"]["by_tag"] == {"pvestatd": 14}


async def test_a_token_that_cannot_see_the_lists_is_skipped_not_clean(start_sim: Any, server_for: Any) -> None:
    sim = start_sim(scenario_with_limited_token("demo"))
    report = await _health(server_for(sim, "limited@pve!mcp"), ["access", "firewall"])
    skipped = {f["subject"]["id"]: f["message"] for f in report["findings"] if f["code"] == "CHECK_SKIPPED"}
    assert set(skipped) >= {"/access/users", "/access/tfa", "/access/acl", "/access/groups", "/pools"}, skipped
    assert "Sys.Audit or User.Modify on /access/groups" in skipped["/access/users"]
    assert "Sys.Audit on /access" in skipped["/access/acl"]
    firewall = {k: v for k, v in skipped.items() if "firewall" in k}
    assert firewall and all("Sys.Audit on /" in m for m in firewall.values()), skipped
    judged = {f["code"] for f in report["findings"]} - {"CHECK_SKIPPED", "DATA_INCOMPLETE", "ACCESS_REALM_NO_TFA"}
    assert judged == set(), judged  # the realm list is world-readable; nothing else is claimed
    assert report["status"] != "ok"


async def test_a_users_own_entry_on_root_overrides_its_groups_administrator(start_sim: Any, server_for: Any) -> None:
    """pve-access-control AccessControl.pm roles: a user's own propagating entry on / replaces its groups'
    Administrator there, so erin (admins member, PVEAuditor of her own on /) is no administrator."""
    data = pvesim.load_scenario("demo")
    data["access"]["users"].append({"userid": "erin@pve", "email": "e@x", "expire_in": "30d", "groups": ["admins"]})
    data["access"]["acl"].append({"path": "/", "user": "erin@pve", "role": "PVEAuditor"})
    report = await _health(server_for(start_sim(data), "root@pam!pvesim"), ["access"])
    found = _found(report)
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "bob@pve") in found
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "erin@pve") not in found


async def test_firewall_rules_pve_skips_or_that_list_anywhere(start_sim: Any, server_for: Any) -> None:
    """pve-firewall Firewall.pm: a rule naming an alias cluster.fw lacks carries errors (verify_rule) and is
    skipped (enable_host_firewall); an address list with 0.0.0.0/0 in it is open to anywhere
    (parse_address_list); security-group references have no log option."""
    data = pvesim.load_scenario("demo")
    fw = data["firewall"]
    fw["aliases"] = {"Mgmt": "10.0.0.0/24"}
    fw["rules"] = [
        {"type": "in", "action": "ACCEPT", "macro": "SSH", "source": "mgmt"},
        {"type": "in", "action": "ACCEPT", "macro": "SSH", "source": "backupnet"},
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "8006", "source": "10.0.0.0/24,0.0.0.0/0"},
        {"type": "group", "action": "webservers"},
    ]
    report = await _health(server_for(start_sim(data), "root@pam!pvesim"), ["firewall"])
    found = _found(report)
    assert found == {
        ("FIREWALL_RULE_INVALID", "cluster/1"),
        ("FIREWALL_RULE_ANY_ADDRESS", "cluster/2"),
        ("FIREWALL_NODE_DISABLED", "pve3"),
    }, found
    invalid = next(f for f in report["findings"] if f["code"] == "FIREWALL_RULE_INVALID")
    assert invalid["evidence"]["errors"] == {"source": "no such alias 'backupnet'"}


@pytest.mark.parametrize("version", ["8.4.14", "9.1.2"])
async def test_built_in_roles_are_the_releases(start_sim: Any, version: str) -> None:
    """pve-access-control AccessControl.pm $privgroups: Sys.AccessNetwork since 8.1.2 (36c1814); PVE 9 dropped
    VM.Monitor (0706945) and added VM.GuestAgent.* (922f710) and VM.Replicate (5f7544f)."""
    rows = api(start_sim("healthy", version=version)).access.roles.get()
    roles = {r["roleid"]: set(r["privs"].split(",")) for r in rows}
    assert "Sys.AccessNetwork" in roles["Administrator"] and "Sys.AccessNetwork" not in roles["PVEAdmin"]
    if version.startswith("9"):
        assert roles["PVEVMUser"] == {
            "VM.Audit", "VM.Backup", "VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.GuestAgent.Audit",
            "VM.GuestAgent.FileRead", "VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite", "VM.PowerMgmt",
        }  # fmt: skip
        assert "VM.Replicate" in roles["PVEVMAdmin"] and "VM.Monitor" not in roles["Administrator"]
    else:
        assert roles["PVEVMUser"] == {
            "VM.Audit", "VM.Backup", "VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.PowerMgmt",
        }  # fmt: skip
        assert "VM.Monitor" in roles["PVEVMAdmin"]
        assert not {p for p in roles["Administrator"] if p == "VM.Replicate" or p.startswith("VM.GuestAgent.")}


async def test_empty_group_and_user_group_lists_are_empty_strings(start_sim: Any) -> None:
    """API2/Group.pm index: ``users`` is joined from the group's member hash, "" when empty; API2/User.pm
    index with full=1: ``groups`` joined from a list, "" when none; without full no ``groups`` at all."""
    pve = api(start_sim("demo"))
    groups = {g["groupid"]: g for g in pve.access.groups.get()}
    assert groups["contractors"]["users"] == "" and groups["admins"]["users"] == "alice@pve,bob@pve"
    full = {u["userid"]: u for u in pve.access.users.get(full=1)}
    assert full["carol@pve"]["groups"] == "" and full["bob@pve"]["groups"] == "admins"
    assert all("groups" not in u for u in pve.access.users.get())


async def test_the_acl_list_shows_entries_the_caller_may_modify(start_sim: Any) -> None:
    """API2/ACL.pm read_acl without Sys.Audit on /access: the entries on paths where check_perm_modify passes,
    which for /vms/<id> also accepts VM.Allocate (RPCEnvironment.pm check_perm_modify)."""
    data = pvesim.load_scenario("demo")
    data["access"]["acl"].append({"path": "/vms/100", "user": "carol@pve", "role": "PVEVMUser"})
    vmadmin = {"id": "vmadmin@pve!mcp", "user_acl": [{"path": "/vms", "role": "PVEVMAdmin"}], "privsep": False}
    data["tokens"] = [*DEFAULT_TOKENS, vmadmin]
    rows = api(start_sim(data), "vmadmin@pve!mcp").access.acl.get()
    assert {(r["path"], r["ugid"]) for r in rows} >= {("/vms/100", "carol@pve")}
    assert all(r["path"].startswith("/vms/") for r in rows), rows


async def test_realms_show_their_tfa_type_only(start_sim: Any, server_for: Any) -> None:
    """API2/Domains.pm index: ``tfa`` is parse_tfa_config's type ('oath'), not the property string; a realm
    enforcing it is no ACCESS_REALM_NO_TFA and gives its users a second factor."""
    data = pvesim.load_scenario("demo")
    data["access"]["realms"] = [{"realm": "corp", "type": "ad", "comment": "AD", "tfa": "type=oath,step=30"}]
    sim = start_sim(data)
    rows = {d["realm"]: d for d in api(sim).access.domains.get()}
    assert rows["corp"] == {"realm": "corp", "type": "ad", "comment": "AD", "tfa": "oath"}
    assert "tfa" not in rows["pam"]
    report = await _health(server_for(sim, "root@pam!pvesim"), ["access"])
    assert ("ACCESS_REALM_NO_TFA", "corp") not in _found(report)


async def test_firewall_answers_carry_pve_digests(demo_sim: SimServer) -> None:
    """Firewall.pm copy_opject_with_digest / copy_list_with_digest: options and every rule carry the sha1
    digest a later PUT must send back; options are only those set in the file."""
    pve = api(demo_sim)
    options = pve.cluster.firewall.options.get()
    assert set(options) == {"enable", "policy_in", "digest"} and len(options["digest"]) == 40
    host = pve.nodes("pve3").firewall.options.get()
    assert host["enable"] == 0 and len(host["digest"]) == 40
    rules = pve.cluster.firewall.rules.get()
    assert len({r["digest"] for r in rules}) == 1 and [r["pos"] for r in rules] == list(range(len(rules)))


async def test_an_expired_administrator_is_named_as_expired_not_as_a_tfa_gap(start_sim: Any, server_for: Any) -> None:
    """AccessControl.pm check_user_enabled refuses an expired account before any second factor is asked."""
    data = pvesim.load_scenario("demo")
    data["access"]["users"].append({"userid": "frank@pve", "email": "f@x", "expired": "2d", "groups": ["admins"]})
    report = await _health(server_for(start_sim(data), "root@pam!pvesim"), ["access"])
    found = _found(report)
    assert ("ACCESS_USER_EXPIRED_ENABLED", "frank@pve") in found
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "frank@pve") not in found and ("ACCESS_GROUP_ADMIN_NO_TFA", "bob@pve") in found


async def test_openid_users_factors_are_not_asked_and_the_realm_is_not_judged(start_sim: Any, server_for: Any) -> None:
    """API2/OpenId.pm login assembles the ticket without a PVE second factor; Auth/OpenId.pm has no tfa."""
    data = pvesim.load_scenario("demo")
    data["access"]["realms"].append({"realm": "sso", "type": "openid", "comment": "Keycloak"})
    data["access"]["users"].append({"userid": "ann@sso", "email": "a@x", "groups": ["admins"], "tfa": ["totp"]})
    report = await _health(server_for(start_sim(data), "root@pam!pvesim"), ["access"])
    found = _found(report)
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "ann@sso") in found
    assert ("ACCESS_REALM_NO_TFA", "sso") not in found and ("ACCESS_REALM_NO_TFA", "corp") in found


async def test_nested_pools(start_sim: Any, server_for: Any) -> None:
    """Pools nest (pve-access-control 8.1, verify_poolname): /pools lists the parent too, the parent holds the
    nested pool's guests, and a propagating ACL entry on the parent reaches the nested pool."""
    data = pvesim.load_scenario("demo")
    data["guests"][0]["pool"] = "dept/team"
    data["access"]["acl"].append({"path": "/pool/dept", "group": "admins", "role": "PVEVMUser"})
    sim = start_sim(data)
    assert {"dept", "dept/team"} <= {p["poolid"] for p in api(sim).pools.get()}
    found = _found(await _health(server_for(sim, "root@pam!pvesim"), ["access"]))
    assert not {c for c in found if c[1] in ("dept", "dept/team")}, found
    assert ("POOL_EMPTY", "archive") in found


async def test_pools_are_not_judged_when_the_token_cannot_see_every_guest(start_sim: Any, server_for: Any) -> None:
    """pve-manager API2/Cluster.pm resources lists a guest only with VM.Audit on it: with Pool.Audit on /pool
    but VM.Audit on one guest only, a pool of hidden guests would look empty, so the pool check is skipped."""
    data = pvesim.load_scenario("demo")
    data["access"]["pools"]["team"] = {"comment": "hidden guests"}
    data["guests"][1]["pool"] = "team"
    narrow = {
        "id": "narrow@pve!mcp",
        "privsep": False,
        "user_acl": [
            {"path": "/", "role": "PVEAuditor", "propagate": False},
            {"path": "/access", "role": "PVEAuditor"},
            {"path": "/pool", "role": "PVEPoolUser"},
            {"path": f"/vms/{data['guests'][0]['vmid']}", "role": "PVEAuditor"},
        ],
    }
    data["tokens"] = [*DEFAULT_TOKENS, narrow]
    sim = start_sim(data)
    report = await _health(server_for(sim, "narrow@pve!mcp"), ["access"])
    skipped = {f["subject"]["id"]: f["message"] for f in report["findings"] if f["code"] == "CHECK_SKIPPED"}
    assert "VM.Audit on /vms" in skipped.get("/pools", ""), skipped
    assert not {c for c in _found(report) if c[0].startswith("POOL_")}
    full = _found(await _health(server_for(sim, "root@pam!pvesim"), ["access"]))
    assert ("POOL_NO_ACL", "team") in full and ("POOL_EMPTY", "team") not in full
