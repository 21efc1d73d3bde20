"""PVE's access model for API tokens: built-in roles, ACL inheritance, groups, pools, privilege separation.

Roles and their privileges follow pve-access-control's ``AccessControl.pm`` (privilege groups
root/admin/user/audit per category). ACLs are evaluated like ``PVE::RPCEnvironment::permissions``:
walking from ``/`` to the object, the deepest node with an entry for the principal wins (its own
entries, else its groups'), non-propagating entries only apply to their exact path, and a guest or
storage also gets the roles its principal holds on the pool it belongs to (``compile_acl_path``; the same
in pve-access-control 8.2 and 9.1). A privilege-separated token gets the intersection of its own and its
user's privileges.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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


def acl_roles(path: str, own: Sequence[AclEntry], groups: Sequence[AclEntry]) -> dict[str, bool]:
    """pve-access-control AccessControl.pm ``roles``: walking from ``/`` to ``path``, at each node the
    principal's own entries replace what was inherited, else its groups' entries do ("user privs always
    override group privs"); an entry applies below its node only if it propagates; NoAccess wins at the end.
    Role -> propagate."""
    parts = [p for p in path.split("/") if p]
    chain = ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
    roles: dict[str, bool] = {}
    for depth, node in enumerate(chain):
        final = depth == len(chain) - 1
        for entries in (own, groups):
            new = {e.role: e.propagate for e in entries if e.path == node and (final or e.propagate)}
            if new:
                roles = new  # overwrite previous settings
                break
    return {"NoAccess": roles["NoAccess"]} if "NoAccess" in roles else roles


def effective_roles(path: str, own: Sequence[AclEntry], groups: Sequence[AclEntry], pools: tuple[str, ...]) -> set[str]:
    """RPCEnvironment.pm ``compile_acl_path``: the roles on ``path``, with those the principal holds on each pool
    the guest or storage belongs to. A NoAccess on the path is never trumped; a pool's NoAccess trumps the
    path's other roles; a pool's other roles are added."""
    roles = set(acl_roles(path, own, groups))
    pooled: set[str] = set()
    for pool in pools:
        pooled |= set(acl_roles(f"/pool/{pool}", own, groups))
    if pooled and "NoAccess" not in roles:
        roles = {"NoAccess"} if "NoAccess" in pooled else roles | pooled
    return roles


@dataclass
class Principal:
    """A user or an API token with its ACL entries."""

    userid: str
    acl: list[AclEntry] = field(default_factory=list)
    roles: dict[str, frozenset[str]] = field(default_factory=lambda: dict(ROLES))

    def privileges(
        self, path: str, more: Sequence[AclEntry] = (), groups: Sequence[AclEntry] = (), pools: tuple[str, ...] = ()
    ) -> frozenset[str]:
        """Privileges on ``path``: ``more`` are user.cfg's other lines naming this principal, ``groups`` those of
        its groups, ``pools`` the pools holding the object at ``path``."""
        if self.userid == "root@pam":  # AccessControl.pm roles: 'Administrator' (the release's privileges)
            return self.roles.get("Administrator", ALL_PRIVILEGES)
        roles = effective_roles(path, [*self.acl, *more], groups, pools)
        return frozenset().union(*(self.roles.get(r, frozenset()) for r in roles))


class UserCfg(Protocol):
    """What user.cfg adds to a token's and its user's own entries (AccessDb with the cluster's guests)."""

    def lines(self, kind: str, ugid: str) -> list[AclEntry]: ...

    def group_lines(self, userid: str) -> list[AclEntry]: ...

    def pools_of(self, path: str) -> tuple[str, ...]: ...


@dataclass
class Token:
    """``user@realm!tokenid`` with its secret; ``privsep`` intersects with the user's rights."""

    user: Principal
    tokenid: str
    secret: str
    privsep: bool = True
    acl: list[AclEntry] = field(default_factory=list)
    roles: dict[str, frozenset[str]] = field(default_factory=lambda: dict(ROLES))
    usercfg: UserCfg | None = field(default=None, repr=False, compare=False)  # groups, other lines, pools
    # (path, pools) -> privileges: every request and every row of /cluster/resources asks; set_acl forgets them
    _known: dict[tuple[str, tuple[str, ...]], frozenset[str]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def full_id(self) -> str:
        return f"{self.user.userid}!{self.tokenid}"

    def set_acl(self, acl: list[AclEntry]) -> None:
        """Replace the token's ACL (the control endpoint); the privileges it gave are forgotten."""
        self.acl = acl
        self._known.clear()

    def privileges(self, path: str) -> frozenset[str]:
        pools = self.usercfg.pools_of(path) if self.usercfg else ()
        known = self._known.get((path, pools))
        if known is None:
            known = self._known[(path, pools)] = self._privileges(path, pools)
        return known

    def _privileges(self, path: str, pools: tuple[str, ...]) -> frozenset[str]:
        """RPCEnvironment.pm ``permissions``: a token without privilege separation has its user's privileges,
        one with it the intersection of its own and its user's. A token's own lines never come from groups."""
        cfg, userid = self.usercfg, self.user.userid
        more = cfg.lines("user", userid) if cfg else []
        user_privs = self.user.privileges(path, more, cfg.group_lines(userid) if cfg else [], pools)
        if not self.privsep:
            return user_privs
        own = Principal(self.full_id, self.acl, self.roles)
        return user_privs & own.privileges(path, cfg.lines("token", self.full_id) if cfg else [], [], pools)

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


def listed(value: object) -> list[str]:
    """A pool's ``storage``: a list, or user.cfg's comma-separated text."""
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v for v in str(value or "").split(",") if v]


@dataclass
class ClusterUserCfg:
    """user.cfg's lines besides a token's own (AccessDb.acl), its groups' members, and which pool holds a guest
    (the cluster's live guests) or a storage (the pools' ``storage``): what Token.privileges asks."""

    db: AccessDb
    guest_pool: Callable[[int], str | None]

    def lines(self, kind: str, ugid: str) -> list[AclEntry]:
        return [AclEntry(a.path, a.roleid, a.propagate) for a in self.db.acl if a.type == kind and a.ugid == ugid]

    def group_lines(self, userid: str) -> list[AclEntry]:
        user = self.db.users.get(userid)
        groups = {g for g in (user.groups if user else []) if g in self.db.groups}  # a group line holds members
        return [AclEntry(a.path, a.roleid, a.propagate) for a in self.db.acl if a.type == "group" and a.ugid in groups]

    def pools_of(self, path: str) -> tuple[str, ...]:
        """RPCEnvironment.pm compile_acl_path's pool roles: a guest is in at most one pool, a storage in any."""
        kind, _, rest = path.removeprefix("/").partition("/")
        if not rest or "/" in rest:
            return ()
        if kind == "vms" and rest.isdigit():
            pool = self.guest_pool(int(rest))
            return (pool,) if pool else ()
        if kind == "storage":
            return tuple(sorted(p for p, d in self.db.pools.items() if rest in listed(d.get("storage"))))
        return ()


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
