"""Access checks on PVE-shaped /access/* answers (full=1 user list, TFA list, ACL, groups, roles, realms, pools)."""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.catalog import code_info
from pve_steward.analysis.checks import access
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding
from pve_steward.analysis.thresholds import Thresholds
from tests.unit.pve_fixtures import DAY, NOW, data, guest_row

T = Thresholds()
PAM = {"realm": "pam", "type": "pam", "comment": "Linux PAM standard authentication"}
PVE = {"realm": "pve", "type": "pve", "comment": "Proxmox VE authentication server"}


def user(userid: str, **kw: Any) -> dict[str, Any]:
    """A row of GET /access/users?full=1 (API2/User.pm index)."""
    realm = userid.rsplit("@", 1)[-1]
    row: dict[str, Any] = {"userid": userid, "enable": 1, "expire": 0, "realm-type": realm, **kw}
    return {k: v for k, v in row.items() if v is not None}


def token(tokenid: str, privsep: int = 1, expire: int = 0, comment: str | None = "ci") -> dict[str, Any]:
    row: dict[str, Any] = {"tokenid": tokenid, "privsep": privsep, "expire": expire}
    if comment is not None:
        row["comment"] = comment
    return row


def tfa(userid: str, *types: str, enable: int = 1) -> dict[str, Any]:
    """A row of GET /access/tfa (API2/TFA.pm list_tfa)."""
    return {
        "userid": userid,
        "entries": [
            {"id": f"{t}-{i}", "type": t, "description": t, "created": int(NOW) - DAY, "enable": enable}
            for i, t in enumerate(types)
        ],
    }


def acl(path: str, kind: str, ugid: str, role: str, propagate: int = 1) -> dict[str, Any]:
    return {"path": path, "type": kind, "ugid": ugid, "roleid": role, "propagate": propagate}


def healthy(**reads: Any) -> ClusterData:
    """A tidy user.cfg: root with TOTP, one scoped operator with TFA and expiry, one used custom role."""
    base: dict[str, Any] = {
        "access_users": [
            user("root@pam", email="root@example.com", expire=None),
            user(
                "ops@pve",
                email="ops@example.com",
                expire=int(NOW + 90 * DAY),
                groups="operators",
                tokens=[token("mcp", expire=int(NOW + 30 * DAY), comment="pve-steward")],
            ),
        ],
        "access_tfa": [tfa("root@pam", "totp"), tfa("ops@pve", "webauthn")],
        "access_acl": [
            acl("/vms", "group", "operators", "PVEVMAdmin"),
            acl("/pool/web", "group", "operators", "Backup"),
        ],
        "access_groups": [{"groupid": "operators", "users": "ops@pve"}],
        "access_roles": [
            {"roleid": "Administrator", "privs": "Sys.Audit,VM.Audit", "special": 1},
            {"roleid": "Backup", "privs": "VM.Backup", "special": 0},
        ],
        "access_domains": [PAM, PVE],
        "pools": [{"poolid": "web"}],
    }
    base.update(reads)
    return data(
        reads={k: {"": v} for k, v in base.items()},
        resources=[guest_row(100, "pve1", pool="web")],
    )


def run(d: ClusterData) -> list[Finding]:
    return [
        f
        for c in (
            access.root_tfa,
            access.admin_tfa,
            access.admin_acl,
            access.tokens,
            access.user_lifecycle,
            access.groups_and_roles,
            access.realm_tfa,
            access.pools,
        )
        for f in c(d, T)
    ]


def codes(d: ClusterData) -> set[tuple[str, str]]:
    return {(f.code, f.subject.id) for f in run(d)}


def test_a_tidy_user_cfg_has_no_finding() -> None:
    assert codes(healthy()) == set()


def test_root_without_a_second_factor_is_critical() -> None:
    found = [f for f in run(healthy(access_tfa=[tfa("ops@pve", "totp")])) if f.code == "ACCESS_ROOT_NO_TFA"]
    assert [(f.subject.id, f.severity) for f in found] == [("root@pam", "critical")]


def test_root_with_only_a_disabled_factor_has_none() -> None:
    disabled = healthy(access_tfa=[tfa("root@pam", "totp", enable=0), tfa("ops@pve", "totp")])
    assert ("ACCESS_ROOT_NO_TFA", "root@pam") in codes(disabled)
    recovery = healthy(access_tfa=[tfa("root@pam", "recovery"), tfa("ops@pve", "totp")])
    assert ("ACCESS_ROOT_NO_TFA", "root@pam") not in codes(recovery)


def test_a_realm_that_enforces_tfa_counts_as_a_second_factor() -> None:
    d = healthy(access_tfa=[tfa("ops@pve", "totp")], access_domains=[{**PAM, "tfa": "oath"}, PVE])
    assert ("ACCESS_ROOT_NO_TFA", "root@pam") not in codes(d)


def test_admin_without_tfa_directly_and_through_a_group() -> None:
    d = healthy(
        access_users=[
            user("root@pam", email="r@x"),
            user("alice@pve", email="a@x", expire=int(NOW + DAY)),
            user("bob@pve", email="b@x", expire=int(NOW + DAY), groups="admins"),
            user("carol@pve", email="c@x", expire=int(NOW + DAY), groups="admins"),
        ],
        access_tfa=[tfa("root@pam", "totp"), tfa("carol@pve", "totp")],
        access_acl=[acl("/vms", "user", "alice@pve", "Administrator"), acl("/", "group", "admins", "Administrator")],
        access_groups=[{"groupid": "admins", "users": "bob@pve,carol@pve"}],
        access_roles=[],
    )
    found = {(f.code, f.subject.id): f for f in run(d)}
    assert found[("ACCESS_ADMIN_NO_TFA", "alice@pve")].evidence["paths"] == ["/vms"]
    assert found[("ACCESS_GROUP_ADMIN_NO_TFA", "bob@pve")].evidence["groups"] == ["admins"]
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "carol@pve") not in found


def test_a_users_own_propagating_entry_on_root_overrides_its_groups_administrator() -> None:
    """AccessControl.pm roles: 'user privs always override group privs' at a node of the ACL tree; a
    propagating user entry on / therefore hides the group's Administrator everywhere, a non-propagating one
    only on / itself (the group's role still reaches every object below)."""
    d = healthy(
        access_users=[
            user("root@pam", email="r@x"),
            user("carol@pve", email="c@x", expire=int(NOW + DAY), groups="admins"),
            user("dave@pve", email="d@x", expire=int(NOW + DAY), groups="admins"),
            user("erin@pve", email="e@x", expire=int(NOW + DAY), groups="admins"),
        ],
        access_tfa=[tfa("root@pam", "totp")],
        access_acl=[
            acl("/", "group", "admins", "Administrator"),
            acl("/", "user", "carol@pve", "PVEAuditor"),
            acl("/", "user", "dave@pve", "PVEAuditor", 0),
            acl("/vms", "user", "erin@pve", "PVEAuditor"),
        ],
        access_groups=[{"groupid": "admins", "users": "carol@pve,dave@pve,erin@pve"}],
        access_roles=[],
    )
    found = codes(d)
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "carol@pve") not in found
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "dave@pve") in found
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "erin@pve") in found


def test_an_expired_administrator_cannot_log_in_so_is_no_tfa_gap() -> None:
    """AccessControl.pm authenticate_user and verify_token call check_user_enabled first: 'access expired'
    before any factor is asked. ACCESS_USER_EXPIRED_ENABLED names the account instead."""
    d = healthy(
        access_users=[
            user("root@pam", email="r@x"),
            user("old@pve", email="o@x", expire=int(NOW - DAY), groups="admins"),
            user("gone@pve", email="g@x", expire=int(NOW - DAY)),
            user("new@pve", email="n@x", expire=int(NOW + DAY), groups="admins"),
        ],
        access_tfa=[tfa("root@pam", "totp")],
        access_acl=[acl("/", "group", "admins", "Administrator"), acl("/vms", "user", "gone@pve", "Administrator")],
        access_groups=[{"groupid": "admins", "users": "old@pve,new@pve"}],
        access_roles=[],
    )
    found = codes(d)
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "new@pve") in found
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "old@pve") not in found and ("ACCESS_ADMIN_NO_TFA", "gone@pve") not in found
    assert ("ACCESS_USER_EXPIRED_ENABLED", "old@pve") in found and ("ACCESS_USER_EXPIRED_ENABLED", "gone@pve") in found


def test_administrator_on_root_held_by_a_user_disabled_or_not_propagating() -> None:
    d = healthy(
        access_users=[user("root@pam", email="r@x"), user("old@pve", enable=0, email="o@x")],
        access_acl=[acl("/", "user", "old@pve", "Administrator"), acl("/", "group", "ops", "Administrator", 0)],
        access_roles=[],
    )
    found = codes(d)
    assert ("ACCESS_ADMIN_AT_ROOT", "/:user:old@pve") in found
    assert ("ACCESS_DISABLED_USER_ADMIN", "/:user:old@pve") in found
    assert ("ACCESS_ADMIN_ROOT_NO_PROPAGATE", "/:group:ops") in found
    assert ("ACCESS_ADMIN_AT_ROOT", "/:group:ops") not in found  # groups are the recommended way


def test_a_non_propagating_administrator_on_root_is_not_described_as_harmless() -> None:
    """ACL.pm update_acl skips its 'superset of privileges' limits for a caller with Permissions.Modify on the
    path, which Administrator on / gives even without propagation: the holder can re-add it propagating."""
    info = code_info("ACCESS_ADMIN_ROOT_NO_PROPAGATE")
    assert "Permissions.Modify" in info.rule and "grants nothing" not in info.rule


def test_tokens_of_disabled_users_root_without_privsep_no_expiry_no_comment() -> None:
    d = healthy(
        access_users=[
            user("root@pam", email="r@x", tokens=[token("full", privsep=0, expire=int(NOW + DAY))]),
            user("gone@pve", enable=0, email="g@x", tokens=[token("ci", expire=int(NOW + DAY))]),
            user("svc@pve", email="s@x", tokens=[token("mon", comment=None)]),
        ],
    )
    found = {(f.code, f.subject.id): f for f in run(d)}
    assert found[("ACCESS_ROOT_TOKEN_NO_PRIVSEP", "root@pam!full")].severity == "warning"
    assert found[("ACCESS_DISABLED_USER_TOKEN", "gone@pve!ci")].evidence["user_enable"] == 0
    assert ("ACCESS_TOKEN_NO_EXPIRY", "svc@pve!mon") in found and ("ACCESS_TOKEN_NO_COMMENT", "svc@pve!mon") in found
    assert ("ACCESS_TOKEN_NO_EXPIRY", "root@pam!full") not in found


def test_a_token_without_expiry_lasts_as_long_as_its_user() -> None:
    d = healthy(
        access_users=[
            user("root@pam", email="r@x"),
            user("svc@pve", email="s@x", expire=int(NOW + DAY), tokens=[token("mon")]),
        ]
    )
    assert ("ACCESS_TOKEN_NO_EXPIRY", "svc@pve!mon") not in codes(d)


def test_user_lifecycle_no_expiry_expired_but_enabled_no_email() -> None:
    d = healthy(
        access_users=[
            user("root@pam", email="r@x"),
            user("temp@pve", email="t@x", expire=int(NOW - DAY)),
            user("dev@pve"),
            user("ext@corp", email="e@x", **{"realm-type": "ldap"}),
        ],
        access_tfa=[tfa("root@pam", "totp")],
    )
    found = codes(d)
    assert ("ACCESS_USER_EXPIRED_ENABLED", "temp@pve") in found
    assert ("ACCESS_USER_NO_EXPIRY", "dev@pve") in found and ("ACCESS_USER_NO_EMAIL", "dev@pve") in found
    assert ("ACCESS_USER_NO_EXPIRY", "ext@corp") not in found  # the directory manages its accounts
    assert ("ACCESS_USER_NO_EXPIRY", "root@pam") not in found  # an expiry on root would lock the cluster out
    root = [f for f in run(d) if f.subject.id == "root@pam"]
    assert root == []


def test_empty_group_and_unused_custom_role() -> None:
    d = healthy(
        access_groups=[{"groupid": "operators", "users": "ops@pve"}, {"groupid": "legacy", "comment": "old team"}],
        access_roles=[
            {"roleid": "Backup", "privs": "VM.Backup", "special": 0},
            {"roleid": "Old", "privs": "VM.Audit", "special": 0},
            {"roleid": "PVEAuditor", "privs": "VM.Audit", "special": 1},
        ],
    )
    found = codes(d)
    assert ("ACCESS_GROUP_EMPTY", "legacy") in found and ("ACCESS_ROLE_UNUSED", "Old") in found
    assert ("ACCESS_ROLE_UNUSED", "Backup") not in found and ("ACCESS_ROLE_UNUSED", "PVEAuditor") not in found


def test_external_realm_without_tfa() -> None:
    d = healthy(
        access_domains=[
            PAM,
            PVE,
            {"realm": "corp", "type": "ad"},
            {"realm": "dir", "type": "ldap", "tfa": "oath"},
            {"realm": "sso", "type": "openid"},
        ]
    )
    found = codes(d)
    assert ("ACCESS_REALM_NO_TFA", "corp") in found and ("ACCESS_REALM_NO_TFA", "dir") not in found
    # Auth/OpenId.pm has no tfa option: nothing in PVE could be set, MFA is the identity provider's
    assert ("ACCESS_REALM_NO_TFA", "sso") not in found


def test_an_openid_users_own_factor_is_never_asked() -> None:
    """API2/OpenId.pm login assembles the ticket without authenticate_2nd_new: a TOTP entry of an OpenID
    user protects nothing, so an OpenID administrator counts as without a second factor."""
    d = healthy(
        access_users=[
            user("root@pam", email="r@x"),
            user("ann@sso", email="a@x", **{"realm-type": "openid"}),
            user("ben@corp", email="b@x", **{"realm-type": "ldap"}),
        ],
        access_tfa=[tfa("root@pam", "totp"), tfa("ann@sso", "totp"), tfa("ben@corp", "totp")],
        access_acl=[acl("/", "group", "admins", "Administrator")],
        access_groups=[{"groupid": "admins", "users": "ann@sso,ben@corp"}],
        access_domains=[PAM, PVE, {"realm": "sso", "type": "openid"}, {"realm": "corp", "type": "ldap", "tfa": "oath"}],
        access_roles=[],
    )
    found = {(f.code, f.subject.id): f for f in run(d)}
    assert ("ACCESS_GROUP_ADMIN_NO_TFA", "ann@sso") in found and ("ACCESS_GROUP_ADMIN_NO_TFA", "ben@corp") not in found
    assert "identity provider" in found[("ACCESS_GROUP_ADMIN_NO_TFA", "ann@sso")].remediation


def test_empty_pool_and_pool_without_acl() -> None:
    d = healthy(pools=[{"poolid": "web"}, {"poolid": "spare"}, {"poolid": "db"}])
    d.resources.append(guest_row(101, "pve1", pool="db"))
    found = codes(d)
    assert ("POOL_EMPTY", "spare") in found and ("POOL_NO_ACL", "db") in found
    assert not {c for c in found if c[1] == "web"}


def test_nested_pools_count_their_children_and_inherit_a_propagating_acl() -> None:
    """AccessControl.pm: pools nest up to three levels (verify_poolname), a parent holds its nested pools
    (parse_user_config), and roles() walks /pool/dept before /pool/dept/team: a propagating entry there reaches it."""
    d = healthy(
        pools=[{"poolid": "web"}, {"poolid": "dept"}, {"poolid": "dept/team"}, {"poolid": "lab"}, {"poolid": "lab/x"}],
        access_acl=[
            acl("/pool/web", "group", "operators", "Backup"),
            acl("/pool/dept", "group", "operators", "PVEVMUser"),
            acl("/pool/lab", "group", "operators", "PVEVMUser", 0),
        ],
    )
    d.resources += [guest_row(101, "pve1", pool="dept/team"), guest_row(102, "pve1", pool="lab/x")]
    found = codes(d)
    assert ("POOL_EMPTY", "dept") not in found and ("POOL_NO_ACL", "dept/team") not in found
    assert ("POOL_NO_ACL", "lab/x") in found  # /pool/lab does not propagate


def test_unread_lists_yield_no_verdict() -> None:
    """A list the collector could not read (or skipped for privileges) is absent: the checks say nothing."""
    d = data(reads={}, resources=[guest_row(100, "pve1", pool="web")])
    assert run(d) == []
    no_root = healthy(access_users=[user("root@pam", email="r@x")], access_tfa=None)
    del no_root.reads["access_tfa"]
    assert "ACCESS_ROOT_NO_TFA" not in {f.code for f in run(no_root)}
