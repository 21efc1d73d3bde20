"""PVE's access model for API tokens: built-in roles, ACL inheritance, privilege separation.

Roles and their privileges follow pve-access-control's ``AccessControl.pm`` (privilege groups
root/admin/user/audit per category). ACLs are evaluated like ``PVE::RPCEnvironment::permissions``:
walking from ``/`` to the object, the deepest path with an entry for the principal wins, and
non-propagating entries only apply to their exact path. A privilege-separated token gets the
intersection of its own and its user's privileges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
            "VM.Migrate",
            "VM.Replicate",
            "VM.Monitor",
            "VM.Snapshot",
            "VM.Snapshot.Rollback",
            "VM.GuestAgent.Unrestricted",
        ],
        "user": ["VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup", "VM.PowerMgmt"],
        "audit": ["VM.Audit", "VM.GuestAgent.Audit"],
    },
    "Sys": {
        "root": ["Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming"],
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
        if self.userid == "root@pam":
            return ALL_PRIVILEGES
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

    @property
    def full_id(self) -> str:
        return f"{self.user.userid}!{self.tokenid}"

    def privileges(self, path: str) -> frozenset[str]:
        user_privs = self.user.privileges(path)
        if not self.privsep:
            return user_privs
        return user_privs & Principal(self.full_id, self.acl, self.roles).privileges(path)

    def has(self, path: str, priv: str) -> bool:
        return priv in self.privileges(path)

    def acl_paths(self) -> list[str]:
        return sorted({e.path for e in self.acl} | {e.path for e in self.user.acl} | {"/"})
