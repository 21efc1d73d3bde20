"""PVE's access model for API tokens: built-in roles, ACL inheritance, privilege separation.

Roles and their privileges follow pve-access-control's ``AccessControl.pm`` (privilege groups
root/admin/user/audit per category). ACLs are evaluated like ``PVE::RPCEnvironment::permissions``:
walking from ``/`` to the object, the deepest path with an entry for the principal wins, and
non-propagating entries only apply to their exact path. A privilege-separated token gets the
intersection of its own and its user's privileges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# pve-access-control AccessControl.pm $privgroups, as the union of PVE 8.4 and 9.1; pvesim.scenario
# _version_roles takes each release's view (PVE8_ONLY, PVE9_ONLY).
_PRIV_GROUPS: dict[str, dict[str, list[str]]] = {
    "VM": {
        "root": [],
        "admin": [
            "VM.Config.Disk",
            "VM.Config.CPU",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.HWType",
            "VM.Config.Options",
            "VM.Allocate",
            "VM.Clone",
            "VM.GuestAgent.Unrestricted",  # PVE 9 (922f710)
            "VM.Migrate",
            "VM.Monitor",  # PVE 8 only (dropped in 0706945)
            "VM.Replicate",  # PVE 9 (5f7544f)
            "VM.Snapshot",
            "VM.Snapshot.Rollback",
        ],
        "user": [
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.Backup",
            "VM.GuestAgent.FileRead",  # PVE 9
            "VM.GuestAgent.FileSystemMgmt",  # PVE 9
            "VM.GuestAgent.FileWrite",  # PVE 9
            "VM.PowerMgmt",
        ],
        "audit": ["VM.Audit", "VM.GuestAgent.Audit"],  # VM.GuestAgent.Audit: PVE 9
    },
    "Sys": {
        "root": ["Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"],  # AccessNetwork: 36c1814, 8.2
        "admin": ["Sys.Console", "Sys.Syslog"],
        "user": [],
        "audit": ["Sys.Audit"],
    },
    "Datastore": {
        "root": [],
        "admin": ["Datastore.Allocate", "Datastore.AllocateTemplate"],
        "user": ["Datastore.AllocateSpace"],
        "audit": ["Datastore.Audit"],
    },
    "SDN": {"root": [], "admin": ["SDN.Allocate", "SDN.Audit"], "user": ["SDN.Use"], "audit": ["SDN.Audit"]},
    "User": {
        "root": ["Realm.Allocate"],
        "admin": ["User.Modify", "Group.Allocate", "Realm.AllocateUser"],
        "user": [],
        "audit": [],
    },
    "Pool": {"root": [], "admin": ["Pool.Allocate"], "user": ["Pool.Audit"], "audit": ["Pool.Audit"]},
    "Mapping": {"root": [], "admin": ["Mapping.Modify"], "user": ["Mapping.Use"], "audit": ["Mapping.Audit"]},
}


def _build_roles() -> dict[str, frozenset[str]]:
    valid: set[str] = {"Permissions.Modify"}
    roles: dict[str, set[str]] = {"NoAccess": set()}
    for cat, groups in _PRIV_GROUPS.items():
        valid.update(*groups.values())
        above_audit = groups["admin"] + groups["user"] + groups["audit"]
        roles.setdefault(f"PVE{cat}Admin", set()).update(above_audit)
        roles.setdefault("PVEAdmin", set()).update(above_audit)
        if groups["user"]:
            roles.setdefault(f"PVE{cat}User", set()).update(groups["user"] + groups["audit"])
        roles.setdefault("PVEAuditor", set()).update(groups["audit"])
    roles["PVEAdmin"].discard("Mapping.Modify")
    roles["PVETemplateUser"] = {"VM.Clone", "VM.Audit"}
    roles["Administrator"] = set(valid)
    return {name: frozenset(privs) for name, privs in roles.items()}


ROLES: dict[str, frozenset[str]] = _build_roles()
ALL_PRIVILEGES: frozenset[str] = ROLES["Administrator"]
PVE8_ONLY: frozenset[str] = frozenset({"VM.Monitor"})
PVE9_ONLY: frozenset[str] = frozenset({"VM.Replicate"} | {p for p in ALL_PRIVILEGES if p.startswith("VM.GuestAgent.")})


@dataclass(frozen=True)
class AclEntry:
    path: str
    role: str
    propagate: bool = True


@dataclass
class Principal:
    """A user or an API token with its ACL entries."""

    userid: str
    acl: list[AclEntry] = field(default_factory=list)
    roles: dict[str, frozenset[str]] = field(default_factory=lambda: dict(ROLES))

    def privileges(self, path: str) -> frozenset[str]:
        if self.userid == "root@pam":  # AccessControl.pm roles: 'Administrator' (the release's privileges)
            return self.roles.get("Administrator", ALL_PRIVILEGES)
        parts = [p for p in path.split("/") if p]
        chain = ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
        current: frozenset[str] = frozenset()
        for depth, prefix in enumerate(chain):
            exact = depth == len(chain) - 1
            entries = [e for e in self.acl if e.path == prefix and (e.propagate or exact)]
            if entries:
                roles = {e.role for e in entries}
                current = (
                    frozenset()
                    if "NoAccess" in roles
                    else frozenset().union(*(self.roles.get(r, frozenset()) for r in roles))
                )
        return current


@dataclass
class Token:
    """``user@realm!tokenid`` with its secret; ``privsep`` intersects with the user's rights."""

    user: Principal
    tokenid: str
    secret: str
    privsep: bool = True
    acl: list[AclEntry] = field(default_factory=list)
    roles: dict[str, frozenset[str]] = field(default_factory=lambda: dict(ROLES))
    # path -> privileges: every request and every row of /cluster/resources asks; set_acl forgets them
    _known: dict[str, frozenset[str]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def full_id(self) -> str:
        return f"{self.user.userid}!{self.tokenid}"

    def set_acl(self, acl: list[AclEntry]) -> None:
        """Replace the token's ACL (the control endpoint); the privileges it gave are forgotten."""
        self.acl = acl
        self._known.clear()

    def privileges(self, path: str) -> frozenset[str]:
        known = self._known.get(path)
        if known is None:
            known = self._known[path] = self._privileges(path)
        return known

    def _privileges(self, path: str) -> frozenset[str]:
        user_privs = self.user.privileges(path)
        if not self.privsep:
            return user_privs
        return user_privs & Principal(self.full_id, self.acl, self.roles).privileges(path)

    def has(self, path: str, priv: str) -> bool:
        return priv in self.privileges(path)


# ---------------------------------------------------------------- user.cfg, tfa.cfg and domains.cfg

# The paths get_effective_permissions always answers for besides those in ACLs
# (pve-access-control PVE/RPCEnvironment.pm get_effective_permissions).
DEFAULT_PERMISSION_PATHS = ("/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms")


@dataclass
class AclRow:
    """One line of user.cfg's ACL: ``acl:<propagate>:<path>:<ugid>:<roleid>``."""

    path: str
    type: str  # user | group | token
    ugid: str
    roleid: str
    propagate: bool = True


@dataclass
class User:
    """A user of user.cfg with its API tokens (tokenid -> privsep/expire/comment) and TFA entries."""

    userid: str
    enable: bool = True
    expire: int = 0
    email: str = ""
    comment: str = ""
    firstname: str = ""
    lastname: str = ""
    groups: list[str] = field(default_factory=list)
    tokens: dict[str, dict[str, object]] = field(default_factory=dict)
    tfa: list[dict[str, object]] = field(default_factory=list)  # tfa.cfg entries: id, type, description, created


def token_acl(tokens: list[Token]) -> list[AclRow]:
    """user.cfg's ACL lines of the API tokens and their users, from their live ACLs (the control API changes them):
    each user's once, each privilege-separated token's own."""
    rows: list[AclRow] = []
    seen: set[str] = set()
    for token in tokens:
        if token.user.userid not in seen:
            seen.add(token.user.userid)
            rows += [AclRow(e.path, "user", token.user.userid, e.role, e.propagate) for e in token.user.acl]
        if token.privsep:
            rows += [AclRow(e.path, "token", token.full_id, e.role, e.propagate) for e in token.acl]
    return rows


@dataclass
class AccessDb:
    """What /access/users, /tfa, /acl, /roles, /groups, /domains and /pools answer from. ``acl``: the lines the
    scenario adds besides its tokens' (token_acl), which user.cfg holds as well."""

    users: dict[str, User] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # groupid -> comment
    roles: dict[str, frozenset[str]] = field(default_factory=dict)  # every role, built-in ones included
    builtin: frozenset[str] = frozenset()  # the release's built-in roles (``special`` in /access/roles)
    acl: list[AclRow] = field(default_factory=list)
    domains: list[dict[str, object]] = field(default_factory=list)
    pools: dict[str, dict[str, object]] = field(default_factory=dict)  # poolid -> comment, storage (list)

    def group_members(self, groupid: str) -> list[str]:
        return sorted(u.userid for u in self.users.values() if groupid in u.groups)


def _when(value: object, now: float) -> int:
    """An expiry as the scenario writes it: ``expire_in: 30d`` (future) or ``expired: 2d`` (past)."""
    from pvesim.scenario import parse_age  # scenario imports this module

    if isinstance(value, dict):
        if "expire_in" in value:
            return int(now + parse_age(value["expire_in"]))
        if "expired" in value:
            return int(now - parse_age(value["expired"]))
    return 0


def access_from(
    data: dict[str, Any],
    tokens: list[Token],
    scenario_tokens: list[dict[str, Any]],
    roles: dict[str, frozenset[str]],
    builtin: frozenset[str],
    now: float,
) -> AccessDb:
    """user.cfg as the scenario describes it (key ``access``), completed with the users and ACLs of the
    scenario's API tokens. root@pam has the installer's e-mail and a TOTP entry unless the scenario says
    otherwise, so an unplanted scenario is healthy."""
    db = AccessDb(
        roles=roles,
        builtin=builtin,
        domains=[
            {"realm": "pam", "type": "pam", "comment": "Linux PAM standard authentication"},
            {"realm": "pve", "type": "pve", "comment": "Proxmox VE authentication server"},
        ],
    )
    db.users["root@pam"] = User(
        "root@pam",
        email="root@localhost",
        tfa=[{"id": "totp-root", "type": "totp", "description": "phone", "created": int(now) - 86400 * 400}],
    )
    for token, td in zip(tokens, scenario_tokens, strict=True):
        userid = token.user.userid
        user = db.users.setdefault(userid, User(userid))
        user.tokens[token.tokenid] = {
            "privsep": int(token.privsep),
            "expire": _when(td, now),
            "comment": td.get("comment", ""),
        }
    spec = data.get("access") or {}
    for ud in spec.get("users", []):
        user = db.users.setdefault(ud["userid"], User(ud["userid"]))
        user.enable = bool(int(ud.get("enable", user.enable)))
        user.expire = _when(ud, now) or user.expire
        for name in ("email", "comment", "firstname", "lastname"):
            setattr(user, name, str(ud.get(name, getattr(user, name))))
        user.groups = list(ud.get("groups", user.groups))
        if "tfa" in ud:
            user.tfa = [
                {"id": f"{kind}-{i}", "type": kind, "description": kind, "created": int(now) - 86400 * 30}
                for i, kind in enumerate(ud["tfa"])
            ]
        for tk in ud.get("tokens", []):
            user.tokens[tk["tokenid"]] = {
                "privsep": int(tk.get("privsep", 1)),
                "expire": _when(tk, now),
                "comment": str(tk.get("comment", "")),
            }
    db.groups = {str(g): str(comment or "") for g, comment in (spec.get("groups") or {}).items()}
    for ad in spec.get("acl", []):
        kind = next(k for k in ("user", "group", "token") if k in ad)
        db.acl.append(AclRow(ad["path"], kind, str(ad[kind]), ad["role"], bool(int(ad.get("propagate", 1)))))
    db.domains += [dict(r) for r in spec.get("realms", [])]
    db.pools = {str(p): dict(v or {}) for p, v in (spec.get("pools") or {}).items()}
    return db
