"""Access hygiene: TFA on root and administrators, Administrator on /, tokens, expiry, groups, roles, realms, pools.

The user, TFA, ACL and group lists are filtered by PVE to what the caller may see, so each is declared
with its ``filters`` (pve/visibility.py): a token that would see only part of a list gets CHECK_SKIPPED, never a
clean bill.
User names, comments and role names are cluster text (the finding machinery marks them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pve_steward.analysis.catalog import Code, Need, check
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import Finding, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.pve import visibility

USERS = Need(
    "access_users",
    "/access/users",
    params=(("full", 1),),
    privilege="Sys.Audit or User.Modify on /access/groups",
    filters=(visibility.USERS,),
)
# pve-access-control API2/TFA.pm list_tfa: the users the caller may see, as the user index filters them
TFA = Need(
    "access_tfa", "/access/tfa", privilege="Sys.Audit or User.Modify on /access/groups", filters=(visibility.USERS,)
)
ACL = Need("access_acl", "/access/acl", privilege="Sys.Audit on /access", filters=(visibility.ACL,))
GROUPS = Need(
    "access_groups",
    "/access/groups",
    privilege="Sys.Audit, User.Modify or Group.Allocate on /access/groups",
    filters=(visibility.GROUPS,),
)
ROLES = Need("access_roles", "/access/roles", privilege="any authenticated user")
DOMAINS = Need("access_domains", "/access/domains", privilege="anyone")
# a pool's guests are counted from /cluster/resources, which lists a guest only with VM.Audit on it and names its
# pool only with Pool.Audit on the pool (pve-manager API2/Cluster.pm resources): else a pool would look empty
POOLS = Need(
    "pools",
    "/pools",
    privilege="Pool.Audit on /pool and VM.Audit on /vms",
    filters=(visibility.POOLS, visibility.GUESTS, visibility.GUEST_POOL),
)

_PVE_TFA = (
    "pve-access-control PVE/API2/TFA.pm list_tfa, PVE/AccessControl.pm authenticate_2nd_new, PVE/API2/OpenId.pm login"
)
_LOCAL_REALMS = {"pam", "pve"}
# directory realms that take a realm-wide ``tfa`` (Auth/LDAP.pm, AD.pm options); OpenId.pm has no such option
_EXTERNAL_REALMS = {"ldap", "ad"}
_FIX_TFA = (
    "Log in as the user and add a TOTP or WebAuthn factor (GUI: Datacenter > Permissions > Two Factor), "
    "or enforce TFA on the realm (`pveum realm modify <realm> --tfa type=oath`)"
)
_FIX_OPENID = " An OpenID user needs MFA at the identity provider: PVE asks OpenID logins for no factor of its own."


def _rows(data: ClusterData, key: str) -> list[Row] | None:
    value = data.read(key)
    return value if isinstance(value, list) else None


def _enabled(row: Row, key: str = "enable", default: int = 1) -> bool:
    """PVE's 0/1 flags (absent: ``default``); an odd value counts as set, never raises."""
    value = row.get(key, default)
    try:
        return bool(int(value or 0))
    except (TypeError, ValueError):
        return bool(value)


def _expire(row: Row) -> int:
    try:
        return int(row.get("expire") or 0)
    except (TypeError, ValueError):
        return 0


@pve_rule(
    "access.login-allowed",
    rule="A user logs in (password or token) only while enabled and not past its expire; TFA comes after that",
    pve="pve-access-control src/PVE/AccessControl.pm check_user_enabled (authenticate_user, verify_token)",
    codes=("ACCESS_ROOT_NO_TFA", "ACCESS_ADMIN_NO_TFA", "ACCESS_GROUP_ADMIN_NO_TFA"),
)
def _can_log_in(row: Row, now: float) -> bool:
    """Enabled and not expired: an expired account is refused before any factor is asked (its own finding,
    ACCESS_USER_EXPIRED_ENABLED, says so), so it is no administrator without a second factor."""
    expire = _expire(row)
    return _enabled(row) and not (expire and expire < now)


def _realm(userid: str) -> str:
    return userid.rsplit("@", 1)[-1]


def _user_subject(userid: str) -> Subject:
    return Subject(kind="user", id=userid)


@pve_rule(
    "access.tfa-factor",
    rule="A user has a second factor when it has an enabled TFA entry or its realm sets tfa (login then asks for "
    "it); an OpenID login asks for none",
    pve="pve-access-control src/PVE/AccessControl.pm authenticate_2nd_new, API2/TFA.pm list_tfa, API2/OpenId.pm login",
    codes=(
        "ACCESS_ROOT_NO_TFA",
        "ACCESS_ADMIN_NO_TFA",
        "ACCESS_GROUP_ADMIN_NO_TFA",
    ),
)
def _tfa_users(data: ClusterData) -> set[str] | None:
    """Users with an enabled TFA entry of their own (any type, as PVE challenges for any), or whose realm
    enforces one (``tfa`` on the realm). OpenID users never count: their login (API2/OpenId.pm login)
    assembles the ticket without asking PVE's factors."""
    tfa, domains = _rows(data, "access_tfa"), _rows(data, "access_domains") or []
    if tfa is None:
        return None
    out = {str(e.get("userid")) for e in tfa if any(_enabled(x) for x in e.get("entries") or [] if isinstance(x, dict))}
    realms = {str(d.get("realm")) for d in domains if d.get("tfa")}
    users = _rows(data, "access_users") or []
    out |= {str(u.get("userid")) for u in users if _realm(str(u.get("userid"))) in realms}
    openid = {str(d.get("realm")) for d in domains if d.get("type") == "openid"}
    openid_users = {
        str(u.get("userid")) for u in users if u.get("realm-type") == "openid" or _realm(str(u.get("userid"))) in openid
    }
    return out - openid_users


def _admin_acl(acl: list[Row], *, root_only: bool = False) -> Iterator[Row]:
    for a in acl:
        if a.get("roleid") == "Administrator" and (not root_only or a.get("path") == "/"):
            yield a


@pve_rule(
    "access.user-overrides-group",
    rule="A user's own ACL entry on a path replaces its groups' entries there; a propagating one on / does so below",
    pve="pve-access-control src/PVE/AccessControl.pm roles ('user privs always override group privs')",
    codes=("ACCESS_GROUP_ADMIN_NO_TFA",),
)
def _own_root_entry(acl: list[Row]) -> set[str]:
    """Users with a propagating entry of their own on / (any role): their groups' Administrator on / applies
    nowhere for them. A non-propagating one overrides / only, so the group's role still reaches every object."""
    return {
        str(a.get("ugid")) for a in acl if a.get("type") == "user" and a.get("path") == "/" and _enabled(a, "propagate")
    }


@check(
    "access",
    codes=[
        Code(
            "ACCESS_ROOT_NO_TFA",
            "critical",
            "root@pam has no second factor",
            "root@pam is enabled and has no enabled TFA entry, and the pam realm enforces none: full control of "
            "the cluster rests on one password.",
            _FIX_TFA + " for root@pam.",
        )
    ],
    needs=[USERS, TFA, DOMAINS],
    anchors=["cv4pve-diag:CC0004"],
    pve=_PVE_TFA,
)
def root_tfa(data: ClusterData, t: Thresholds) -> list[Finding]:
    """root@pam without a second factor."""
    users, with_tfa = _rows(data, "access_users"), _tfa_users(data)
    if users is None or with_tfa is None:
        return []
    root = next((u for u in users if u.get("userid") == "root@pam"), None)
    if root is None or not _can_log_in(root, data.now) or "root@pam" in with_tfa:
        return []
    return [finding("ACCESS_ROOT_NO_TFA", _user_subject("root@pam"), "root@pam has no second factor", {"tfa": []})]


@check(
    "access",
    codes=[
        Code(
            "ACCESS_ADMIN_NO_TFA",
            "warning",
            "Administrator without a second factor",
            "An enabled, unexpired user (besides root@pam) holds the Administrator role in an ACL entry of its own "
            "and has no enabled TFA entry, nor a realm that enforces one (an OpenID user's entries do not count).",
            _FIX_TFA + "; or replace Administrator by a narrower role." + _FIX_OPENID,
        ),
        Code(
            "ACCESS_GROUP_ADMIN_NO_TFA",
            "warning",
            "Administrator through a group, without a second factor",
            "An enabled, unexpired member of a group that holds Administrator on / has no enabled TFA entry, nor "
            "a realm that enforces one (an OpenID user's entries do not count). A member with a propagating ACL "
            "entry of its own on / is not counted: PVE lets "
            "a user's own entry override its groups' (AccessControl.pm roles).",
            _FIX_TFA + "; or take the user out of the group (`pveum user modify <user> --groups ...`)." + _FIX_OPENID,
        ),
    ],
    needs=[USERS, TFA, ACL, GROUPS, DOMAINS],
    anchors=["cv4pve-diag:WC0007", "cv4pve-diag:WC0013"],
    pve=_PVE_TFA,
)
def admin_tfa(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Administrators, directly or through a group, without a second factor."""
    users, acl, with_tfa = _rows(data, "access_users"), _rows(data, "access_acl"), _tfa_users(data)
    if users is None or acl is None or with_tfa is None:
        return []
    enabled = {str(u.get("userid")) for u in users if _can_log_in(u, data.now)} - {"root@pam"}
    out: list[Finding] = []
    direct: dict[str, list[str]] = {}
    for a in _admin_acl(acl):
        if a.get("type") == "user":
            direct.setdefault(str(a.get("ugid")), []).append(str(a.get("path")))
    for userid in sorted(set(direct) & enabled - with_tfa):
        out.append(
            finding(
                "ACCESS_ADMIN_NO_TFA",
                _user_subject(userid),
                f"{userid} has Administrator on {', '.join(direct[userid])} and no second factor",
                {"paths": direct[userid], "tfa": []},
            )
        )
    groups = _rows(data, "access_groups")
    if groups is None:
        return out
    admin_groups = {str(a.get("ugid")) for a in _admin_acl(acl, root_only=True) if a.get("type") == "group"}
    via: dict[str, list[str]] = {}
    for g in groups:
        if g.get("groupid") in admin_groups:
            for member in str(g.get("users") or "").split(","):
                if member.strip():
                    via.setdefault(member.strip(), []).append(str(g.get("groupid")))
    for userid in sorted(set(via) & enabled - with_tfa - set(direct) - _own_root_entry(acl)):
        out.append(
            finding(
                "ACCESS_GROUP_ADMIN_NO_TFA",
                _user_subject(userid),
                f"{userid} is Administrator on / through group {', '.join(via[userid])} and has no second factor",
                {"groups": via[userid], "tfa": []},
            )
        )
    return out


@check(
    "access",
    codes=[
        Code(
            "ACCESS_ADMIN_AT_ROOT",
            "warning",
            "User holds Administrator on /",
            "A user (not a group or token) has the Administrator role on the root path, which grants every "
            "privilege on every object of the cluster.",
            "Grant narrower roles on the paths the user works on (`pveum acl modify /pool/<pool> --users <user> "
            "--roles PVEVMAdmin`), then `pveum acl delete / --users <user> --roles Administrator`.",
        ),
        Code(
            "ACCESS_ADMIN_ROOT_NO_PROPAGATE",
            "info",
            "Administrator on / without propagation",
            "An Administrator entry on / has propagate off, so its privileges apply to the root path only. That is "
            "no narrowing: it includes Permissions.Modify on /, with which the holder may add any role on / with "
            "propagation (ACL.pm update_acl), so it is full control one call away.",
            "Delete the entry and grant what is really needed on narrower paths (`pveum acl delete / --users <user> "
            "--roles Administrator`), or re-add it with propagation if full control was meant.",
        ),
        Code(
            "ACCESS_DISABLED_USER_ADMIN",
            "warning",
            "Disabled user still holds Administrator on /",
            "A disabled user keeps an Administrator entry on /; re-enabling the account restores full control.",
            "`pveum acl delete / --users <user> --roles Administrator` (GUI: Datacenter > Permissions).",
        ),
    ],
    needs=[USERS, ACL],
    anchors=["cv4pve-diag:WC0005", "cv4pve-diag:IC0010", "cv4pve-diag:WC0014"],
    pve="pve-access-control PVE/AccessControl.pm roles (propagate), PVE/API2/ACL.pm update_acl (Permissions.Modify)",
)
@pve_rule(
    "access.acl-propagate",
    rule="An ACL entry with propagate 0 applies to its own path only, not to the objects below it",
    pve="pve-access-control src/PVE/AccessControl.pm roles ($final || $propagate), via RPCEnvironment.pm permissions",
    codes=("ACCESS_ADMIN_ROOT_NO_PROPAGATE",),
)
def admin_acl(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Administrator entries on / held by users, without propagation, or by disabled users."""
    acl = _rows(data, "access_acl")
    if acl is None:
        return []
    users = _rows(data, "access_users")
    disabled = {str(u.get("userid")) for u in users or [] if not _enabled(u)}
    out: list[Finding] = []
    for a in _admin_acl(acl, root_only=True):
        ugid, kind = str(a.get("ugid")), str(a.get("type"))
        evidence = {"path": "/", "type": kind, "ugid": ugid, "roleid": "Administrator", "propagate": a.get("propagate")}
        subject = Subject(kind="acl", id=f"/:{kind}:{ugid}")
        if kind == "user":
            out.append(finding("ACCESS_ADMIN_AT_ROOT", subject, f"user {ugid} has Administrator on /", evidence))
            if ugid in disabled:
                out.append(
                    finding(
                        "ACCESS_DISABLED_USER_ADMIN",
                        subject,
                        f"disabled user {ugid} still has Administrator on /",
                        evidence,
                    )
                )
        if not _enabled(a, "propagate"):
            out.append(
                finding(
                    "ACCESS_ADMIN_ROOT_NO_PROPAGATE",
                    subject,
                    f"{kind} {ugid} has Administrator on / without propagation",
                    evidence,
                )
            )
    return out


def _tokens(users: list[Row]) -> Iterator[tuple[Row, Row]]:
    for u in users:
        for tok in u.get("tokens") or []:
            yield u, tok


@check(
    "access",
    codes=[
        Code(
            "ACCESS_DISABLED_USER_TOKEN",
            "info",
            "Disabled user still has API tokens",
            "A disabled user keeps API tokens. PVE refuses them while the user is disabled (verify_token checks "
            "the user), but re-enabling the account revives every token at once.",
            "`pveum user token remove <user> <tokenid>` (GUI: Datacenter > Permissions > API Tokens).",
        ),
        Code(
            "ACCESS_ROOT_TOKEN_NO_PRIVSEP",
            "warning",
            "root@pam token without privilege separation",
            "An API token of root@pam has privsep off, so it carries every privilege of root: whoever holds the "
            "secret controls the cluster.",
            "Create a privilege-separated token with only the roles it needs "
            "(`pveum user token add root@pam <id> --privsep 1`, then `pveum acl modify ... --tokens`), "
            "move its users over and remove the old one.",
        ),
        Code(
            "ACCESS_TOKEN_NO_EXPIRY",
            "info",
            "API token never expires",
            "A token of an enabled local (pam/pve) user has no expiry of its own and its user has none either "
            "(a token without one lasts as long as its user).",
            "`pveum user token modify <user> <tokenid> --expire <epoch>` and rotate it before then.",
        ),
        Code(
            "ACCESS_TOKEN_NO_COMMENT",
            "info",
            "API token has no comment",
            "An API token has no comment, so at audit time nobody can tell what it is for or who owns it.",
            "`pveum user token modify <user> <tokenid> --comment '<purpose, owner>'`.",
        ),
    ],
    needs=[USERS],
    anchors=["cv4pve-diag:WC0006", "cv4pve-diag:WC0015", "cv4pve-diag:IC0006", "cv4pve-diag:IC0021"],
    pve="pve-access-control PVE/AccessControl.pm verify_token, check_user_enabled",
)
@pve_rule(
    "access.token-validity",
    rule="A token is refused while its user is disabled or expired; without its own expire it lasts as its user does",
    pve="pve-access-control src/PVE/AccessControl.pm verify_token, check_user_enabled",
    codes=(
        "ACCESS_DISABLED_USER_TOKEN",
        "ACCESS_TOKEN_NO_EXPIRY",
        "ACCESS_ROOT_TOKEN_NO_PRIVSEP",
    ),
)
def tokens(data: ClusterData, t: Thresholds) -> list[Finding]:
    """API tokens: of disabled users, root tokens without privsep, without expiry, without a comment."""
    users = _rows(data, "access_users")
    if users is None:
        return []
    out: list[Finding] = []
    for u, tok in _tokens(users):
        userid = str(u.get("userid"))
        full = f"{userid}!{tok.get('tokenid')}"
        subject = Subject(kind="token", id=full)
        evidence: dict[str, Any] = {
            "privsep": tok.get("privsep", 1),
            "expire": tok.get("expire", 0),
            "user_enable": u.get("enable", 1),
            "user_expire": u.get("expire", 0),
        }
        if not _enabled(u):
            out.append(
                finding("ACCESS_DISABLED_USER_TOKEN", subject, f"disabled user {userid} has token {full}", evidence)
            )
        if userid == "root@pam" and not _enabled(tok, "privsep"):
            out.append(
                finding("ACCESS_ROOT_TOKEN_NO_PRIVSEP", subject, f"{full} has no privilege separation", evidence)
            )
        local = u.get("realm-type", _realm(userid)) in _LOCAL_REALMS
        if _enabled(u) and local and not _expire(tok) and not _expire(u):
            out.append(finding("ACCESS_TOKEN_NO_EXPIRY", subject, f"{full} never expires", evidence))
        if not str(tok.get("comment") or "").strip():
            out.append(finding("ACCESS_TOKEN_NO_COMMENT", subject, f"{full} has no comment", {"comment": ""}))
    return out


@check(
    "access",
    codes=[
        Code(
            "ACCESS_USER_NO_EXPIRY",
            "info",
            "Local user has no expiry date",
            "An enabled pam or pve user (besides root@pam, which must stay usable) has no expiration date, so a "
            "forgotten account stays usable forever.",
            "`pveum user modify <user> --expire <epoch>` (GUI: Datacenter > Permissions > Users > Edit).",
        ),
        Code(
            "ACCESS_USER_EXPIRED_ENABLED",
            "info",
            "Expired user is still enabled",
            "A user's expiration date has passed but the account is still enabled. PVE already refuses its logins "
            "and tokens (check_user_enabled), but moving the date revives it: disable or remove the account.",
            "`pveum user modify <user> --enable 0` or `pveum user delete <user>`.",
        ),
        Code(
            "ACCESS_USER_NO_EMAIL",
            "info",
            "Enabled user has no e-mail address",
            "An enabled user has no e-mail address, so notifications addressed to the user reach nobody.",
            "`pveum user modify <user> --email <address>`.",
        ),
    ],
    needs=[USERS],
    anchors=["cv4pve-diag:IC0005", "cv4pve-diag:WC0016", "cv4pve-diag:IC0007"],
    pve="pve-access-control PVE/AccessControl.pm check_user_enabled",
)
@pve_rule(
    "access.user-expiry",
    rule="A user whose expire lies in the past is refused (access expired) even while enable is 1",
    pve="pve-access-control src/PVE/AccessControl.pm check_user_enabled",
    codes=(
        "ACCESS_USER_EXPIRED_ENABLED",
        "ACCESS_USER_NO_EXPIRY",
    ),
)
def user_lifecycle(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Accounts without an expiry, expired but enabled, or without an e-mail address."""
    users = _rows(data, "access_users")
    if users is None:
        return []
    out: list[Finding] = []
    for u in users:
        if not _enabled(u):
            continue
        userid, expire = str(u.get("userid")), _expire(u)
        subject, evidence = _user_subject(userid), {"enable": u.get("enable", 1), "expire": expire}
        if expire and expire < data.now:
            out.append(finding("ACCESS_USER_EXPIRED_ENABLED", subject, f"{userid} expired but is enabled", evidence))
        if not expire and userid != "root@pam" and u.get("realm-type", _realm(userid)) in _LOCAL_REALMS:
            out.append(finding("ACCESS_USER_NO_EXPIRY", subject, f"{userid} has no expiry date", evidence))
        if not str(u.get("email") or "").strip():
            out.append(finding("ACCESS_USER_NO_EMAIL", subject, f"{userid} has no e-mail address", {"email": ""}))
    return out


@check(
    "access",
    codes=[
        Code(
            "ACCESS_GROUP_EMPTY",
            "info",
            "Group has no members",
            "A group has no users: leftover configuration, and any ACL entry on it grants nothing.",
            "`pveum group delete <group>` if it is no longer needed.",
        ),
        Code(
            "ACCESS_ROLE_UNUSED",
            "info",
            "Custom role is not used",
            "A custom (non built-in) role appears in no ACL entry.",
            "`pveum role delete <role>` if it is no longer needed.",
        ),
    ],
    needs=[GROUPS, ROLES, ACL],
    anchors=["cv4pve-diag:IC0008", "cv4pve-diag:IC0009"],
    pve="pve-access-control PVE/API2/Group.pm index, PVE/API2/Role.pm index (special)",
)
def groups_and_roles(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Groups without members, custom roles no ACL entry uses."""
    out: list[Finding] = []
    for g in _rows(data, "access_groups") or []:
        if not str(g.get("users") or "").strip():
            gid = str(g.get("groupid"))
            out.append(finding("ACCESS_GROUP_EMPTY", Subject(kind="group", id=gid), f"group {gid} has no members"))
    roles, acl = _rows(data, "access_roles"), _rows(data, "access_acl")
    if roles is None or acl is None:
        return out
    used = {str(a.get("roleid")) for a in acl}
    for r in roles:
        rid = str(r.get("roleid"))
        if not _enabled(r, "special", 0) and rid not in used:
            out.append(
                finding(
                    "ACCESS_ROLE_UNUSED",
                    Subject(kind="role", id=rid),
                    f"custom role {rid} is in no ACL entry",
                    {"privs": r.get("privs", "")},
                )
            )
    return out


@check(
    "access",
    codes=[
        Code(
            "ACCESS_REALM_NO_TFA",
            "info",
            "External realm does not enforce TFA",
            "An LDAP or AD realm has no realm-wide second factor (``tfa``), so its users log in with a "
            "password alone unless each adds a factor. OpenID realms are not judged: PVE has no tfa option for "
            "them and asks their logins for no factor; MFA is the identity provider's.",
            "`pveum realm modify <realm> --tfa type=oath` (GUI: Datacenter > Permissions > Realms > Edit), or "
            "require a second factor at the directory.",
        )
    ],
    needs=[DOMAINS],
    anchors=["cv4pve-diag:IC0011"],
    pve="pve-access-control PVE/Auth/LDAP.pm, AD.pm options (tfa); OpenId.pm has none",
)
def realm_tfa(data: ClusterData, t: Thresholds) -> list[Finding]:
    """External realms without realm-level TFA."""
    out = []
    for d in _rows(data, "access_domains") or []:
        if str(d.get("type")) in _EXTERNAL_REALMS and not d.get("tfa"):
            realm = str(d.get("realm"))
            out.append(
                finding(
                    "ACCESS_REALM_NO_TFA",
                    Subject(kind="realm", id=realm),
                    f"realm {realm} ({d.get('type')}) enforces no second factor",
                    {"type": d.get("type"), "tfa": None},
                )
            )
    return out


@check(
    "access",
    codes=[
        Code(
            "POOL_EMPTY",
            "info",
            "Resource pool has no guests",
            "A pool has no guest as a member, nor have the pools nested in it (storage members are not listed "
            "cluster-wide, so a pool holding only storage shows here too).",
            "Add guests (`pvesh set /pools/<pool> --vms <vmid>`) or remove the pool (`pveum pool delete <pool>`).",
        ),
        Code(
            "POOL_NO_ACL",
            "info",
            "Pool is not used as a privilege boundary",
            "A pool has guests but no ACL entry on /pool/<pool> (nor a propagating one on an enclosing pool), so "
            "it groups guests without delegating anything.",
            "Grant the pool's operators a role on it: `pveum acl modify /pool/<pool> --groups <group> "
            "--roles PVEVMUser`.",
        ),
    ],
    needs=[POOLS, ACL],
    anchors=["cv4pve-diag:IC0004", "cv4pve-diag:IC0020"],
    pve="pve-manager PVE/API2/Cluster.pm resources (pool of a guest), PVE/API2/Pool.pm index",
)
def pools(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Pools without guests (their nested pools' included), and pools with guests but no ACL entry."""
    pool_rows = _rows(data, "pools")
    if pool_rows is None:
        return []
    members: dict[str, int] = {}
    for g in data.guests.values():
        if g.get("pool"):
            members[str(g["pool"])] = members.get(str(g["pool"]), 0) + 1
    acl = _rows(data, "access_acl")
    out: list[Finding] = []
    for p in pool_rows:
        pid = str(p.get("poolid"))
        subject = Subject(kind="pool", id=pid)
        count = sum(n for name, n in members.items() if name == pid or name.startswith(pid + "/"))
        if not count:
            out.append(finding("POOL_EMPTY", subject, f"pool {pid} has no guests", {"guests": 0}))
        elif acl is not None and not _pool_acl(acl, pid):
            out.append(
                finding("POOL_NO_ACL", subject, f"pool {pid} has {count} guests but no ACL entry", {"guests": count})
            )
    return out


@pve_rule(
    "access.nested-pools",
    rule="Pools nest up to three levels (a/b/c); a propagating ACL entry on /pool/a reaches /pool/a/b, and a "
    "parent pool holds its nested pools",
    pve="pve-access-control src/PVE/AccessControl.pm verify_poolname, parse_user_config (pool), roles",
    codes=("POOL_EMPTY", "POOL_NO_ACL"),
)
def _pool_acl(acl: list[Row], pid: str) -> bool:
    """An ACL entry on the pool's own path, or a propagating one on an enclosing pool's."""
    parts = pid.split("/")
    for a in acl:
        path = str(a.get("path")).rstrip("/")
        if path == f"/pool/{pid}":
            return True
        if _enabled(a, "propagate") and any(path == "/pool/" + "/".join(parts[:i]) for i in range(1, len(parts))):
            return True
    return False
