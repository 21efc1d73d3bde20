"""pvesim grants what PVE grants through groups and pools (pve-access-control AccessControl.pm ``roles``,
RPCEnvironment.pm ``compile_acl_path`` and ``get_effective_permissions``), read through proxmoxer:

- a group's line reaches its members, and through a user without privilege separation its tokens; a
  privilege-separated token's own lines never come from groups;
- at one node, the user's own line replaces the group's ("user privs always override group privs");
- a role on a pool reaches the pool's guests and storages (not propagated below them);
- a pool's NoAccess trumps a guest's other roles, and a NoAccess on the guest is never trumped by a pool.

Careful admins scope tokens by pool and group, so the scoped-token suites need the simulator to answer as
PVE does there.
"""

from __future__ import annotations

from typing import Any

import pvesim
from pvesim.scenario import DEFAULT_TOKENS
from tests.integration.pve import api

GUESTS = {200, 201, 202, 203, 204, 9001}  # truth.yaml; 200 and 201 are in pool "prod"


def _truth(tokens: list[dict[str, Any]], **access: Any) -> dict[str, Any]:
    data = pvesim.load_scenario("truth")
    data["tokens"] = [*DEFAULT_TOKENS, *tokens]
    data["access"] = {"groups": {"ops": "operators", "idle": ""}, **access}
    return data


def _privs(pve: Any, path: str) -> set[str]:
    return set(pve.access.permissions.get(path=path).get(path, {}))


def _guests(pve: Any) -> set[int]:
    return {int(r["vmid"]) for r in pve.cluster.resources.get(type="vm")}


def test_a_groups_line_reaches_its_members_and_a_users_own_line_replaces_it(start_sim: Any) -> None:
    data = _truth(
        [
            {"id": "olga@pve!mcp", "privsep": False},  # the user's privileges, all from user.cfg's lines
            {"id": "olga@pve!sep"},  # privilege-separated, with no line of its own
            {"id": "paul@pve!mcp", "privsep": False},  # in a group without lines
        ],
        users=[{"userid": "olga@pve", "groups": ["ops"]}, {"userid": "paul@pve", "groups": ["idle"]}],
        acl=[
            {"path": "/", "group": "ops", "role": "PVEAuditor"},
            {"path": "/storage", "group": "ops", "role": "PVEDatastoreAdmin"},
            {"path": "/storage", "user": "olga@pve", "role": "PVEAuditor"},  # replaces the group's at /storage
            {"path": "/vms/202", "user": "olga@pve", "role": "NoAccess"},
        ],
    )
    sim = start_sim(data)
    olga = api(sim, "olga@pve!mcp")
    assert _guests(olga) == GUESTS - {202}
    assert "VM.Audit" in _privs(olga, "/vms/200") and _privs(olga, "/vms/202") == set()
    storage = _privs(olga, "/storage/pbs")
    assert "Datastore.Audit" in storage and "Datastore.Allocate" not in storage  # not the group's
    effective = olga.access.permissions.get()
    assert "/vms/202" not in effective and "Sys.Audit" in effective["/"]
    assert _guests(api(sim, "olga@pve!sep")) == set()  # a token's own lines never come from groups
    assert api(sim, "olga@pve!sep").access.permissions.get() == {}
    assert _guests(api(sim, "paul@pve!mcp")) == set()


def test_a_role_on_a_pool_reaches_its_guests_and_storages(start_sim: Any) -> None:
    on_pool = [{"path": "/pool/prod", "role": "PVEAuditor"}]
    on_parent = [{"path": "/pool/dept", "role": "PVEAuditor"}]  # nested pools (8.1): /pool/dept/team inherits
    data = _truth(
        [
            {"id": "scoped@pve!mcp", "user_acl": on_pool, "acl": on_pool},
            {"id": "dept@pve!mcp", "user_acl": on_parent, "acl": on_parent},
        ],
        pools={"prod": {"comment": "production", "storage": ["pbs"]}},
    )
    next(g for g in data["guests"] if g["vmid"] == 202)["pool"] = "dept/team"
    sim = start_sim(data)
    assert _guests(api(sim, "dept@pve!mcp")) == {202}
    scoped = api(sim, "scoped@pve!mcp")
    assert _guests(scoped) == {200, 201}
    effective = scoped.access.permissions.get()
    assert {p for p in effective if p.startswith(("/vms/", "/storage/"))} == {"/vms/200", "/vms/201", "/storage/pbs"}
    assert "VM.Audit" in effective["/vms/200"] and "Datastore.Audit" in effective["/storage/pbs"]
    assert _privs(scoped, "/vms/202") == set() and _privs(scoped, "/storage/local") == set()
    assert _privs(scoped, "/vms/200/whatever") == set()  # a pool's roles are not propagated below a member
    assert [p["poolid"] for p in scoped.pools.get()] == ["prod"]


def test_a_pools_noaccess_trumps_and_a_guests_noaccess_is_never_trumped(start_sim: Any) -> None:
    hidden = [{"path": "/", "role": "PVEAuditor"}, {"path": "/pool/prod", "role": "NoAccess"}]
    mixed = [
        {"path": "/", "role": "PVEAuditor"},
        {"path": "/vms/200", "role": "NoAccess"},
        {"path": "/pool/prod", "role": "PVEVMUser"},
    ]
    sim = start_sim(
        _truth(
            [
                {"id": "hidden@pve!mcp", "user_acl": hidden, "acl": hidden},
                {"id": "mixed@pve!mcp", "user_acl": mixed, "acl": mixed},
            ]
        )
    )
    assert _guests(api(sim, "hidden@pve!mcp")) == GUESTS - {200, 201}
    mixed_api = api(sim, "mixed@pve!mcp")
    assert _guests(mixed_api) == GUESTS - {200}
    assert _privs(mixed_api, "/vms/200") == set()
    assert {"VM.Audit", "VM.PowerMgmt", "VM.Backup"} <= _privs(mixed_api, "/vms/201")  # the pool's role is added
    assert "VM.PowerMgmt" not in _privs(mixed_api, "/vms/202")
