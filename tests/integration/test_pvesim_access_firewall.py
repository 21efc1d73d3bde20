"""pvesim's access, firewall and monitoring reads through proxmoxer: what each token sees, filtered as PVE
filters it (User.pm index, ACL.pm read_acl, Group.pm index, Pool.pm index, Cluster.pm log)."""

from __future__ import annotations

from typing import Any

import pytest
from proxmoxer import ResourceException

from pvesim.server import SimServer
from tests.integration.conftest import scenario_with_limited_token
from tests.integration.pve import api


def test_an_auditor_sees_user_cfg_whole(demo_sim: SimServer) -> None:
    pve = api(demo_sim, "auditor@pve!mcp")
    users = {u["userid"]: u for u in pve.access.users.get(full=1)}
    assert users["dave@pve"]["enable"] == 0 and users["dave@pve"]["tokens"] == [
        {"tokenid": "backup", "privsep": 1, "expire": 0, "comment": "nightly rsync script"}
    ]
    assert users["bob@pve"]["groups"] == "admins" and users["root@pam"]["realm-type"] == "pam"
    assert "tokens" not in {k for u in pve.access.users.get() for k in u}  # only with full=1
    assert {u["userid"] for u in pve.access.users.get(enabled=0)} == {"dave@pve"}
    assert {t["userid"]: [e["type"] for e in t["entries"]] for t in pve.access.tfa.get()} == {
        "alice@pve": ["totp"],
        "carol@pve": ["webauthn"],
    }
    acl = {(a["path"], a["type"], a["ugid"], a["roleid"]) for a in pve.access.acl.get()}
    assert ("/", "group", "admins", "Administrator") in acl and ("/", "token", "auditor@pve!mcp", "PVEAuditor") in acl
    groups = {g["groupid"]: g for g in pve.access.groups.get()}
    # Group.pm index joins the group's member hash, which every group line has: "" for an empty group
    assert groups["admins"]["users"] == "alice@pve,bob@pve" and groups["contractors"]["users"] == ""
    roles = {r["roleid"]: r for r in pve.access.roles.get()}
    assert roles["LegacyAudit"]["special"] == 0 and roles["PVEAuditor"]["special"] == 1
    assert {d["realm"]: d["type"] for d in pve.access.domains.get()} == {"pam": "pam", "pve": "pve", "corp": "ad"}
    assert [p["poolid"] for p in pve.pools.get()] == ["archive"]


def test_firewall_and_monitoring_reads(demo_sim: SimServer) -> None:
    pve = api(demo_sim, "auditor@pve!mcp")
    # Firewall.pm copy_opject_with_digest: the options set in the file plus their digest
    options = pve.cluster.firewall.options.get()
    assert options.pop("digest") and options == {"enable": 1, "policy_in": "DROP"}
    rules = pve.cluster.firewall.rules.get()
    assert [(r["pos"], r["enable"]) for r in rules] == [(0, 1), (1, 1), (2, 0)] and rules[1]["source"] == "0.0.0.0/0"
    pve3, pve1 = pve.nodes("pve3").firewall.options.get(), pve.nodes("pve1").firewall.options.get()
    assert pve3.pop("digest") and pve3 == {"enable": 0} and set(pve1) == {"digest"}
    assert pve.cluster.metrics.server.get() == []
    assert pve.cluster.log.get(max=200) == []  # no Sys.Syslog: only its own entries, and it started no task
    root_log = api(demo_sim).cluster.log.get(max=200)
    assert sum(1 for e in root_log if e["pri"] == 3) == 14
    assert all(e["id"] == f"{e['uid']}:{e['node']}" for e in root_log)
    assert [e["time"] for e in root_log] == sorted((e["time"] for e in root_log), reverse=True)  # newest first


def test_a_token_without_audit_rights_sees_partial_lists_or_is_refused(start_sim: Any) -> None:
    sim = start_sim(scenario_with_limited_token("demo"))
    pve = api(sim, "limited@pve!mcp")
    assert pve.access.users.get(full=1) == [] and pve.access.tfa.get() == []  # the token id is no user
    assert pve.access.acl.get() == [] and pve.access.groups.get() == [] and pve.pools.get() == []
    assert pve.access.domains.get() and pve.access.roles.get()  # readable by anyone
    with pytest.raises(ResourceException, match="403"):
        pve.cluster.firewall.options.get()
    with pytest.raises(ResourceException, match="403"):
        pve.nodes("pve1").firewall.options.get()
    perms = pve.access.permissions.get()
    assert set(perms) == {"/vms"}  # PVE answers its default paths too, but only those with privileges
