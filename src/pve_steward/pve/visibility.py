"""What PVE's privilege-filtered lists show a token: each filter declared once, each object answered once.

Many PVE lists answer with the rows the caller may see and give no sign that others were left out
(pve-storage API2/Storage/Config.pm index, pve-manager API2/Cluster.pm resources and tasks, ...); others
refuse the whole list (403) without one privilege. A :class:`Filter` says how one list filters: the ACL
path of a row's object and the privileges any one of which shows the row, beside the PVE function that
does it (:data:`FILTERS`). :class:`Visibility` answers from the caller's own privileges, read once
(``GET /access/permissions``), whether the caller sees one object (True, False, or None: cannot tell) and
whether a list shows every row. Design record 261206-55.

How the privilege map is read (pve-access-control RPCEnvironment.pm get_effective_permissions): it holds
the default paths (/, /access, /access/groups, /nodes, /pool, /sdn, /storage, /vms), every path of the ACL
tree (anyone's entries) and every pool member, each with the caller's effective privileges, and leaves out
every such path where the caller has none. So a listed path is exact; an unlisted default path, or an
unlisted path of the ACL tree, has no privileges at all (a NoAccess entry); any other path inherits from
its nearest listed ancestor, unless an ACL entry on it hides it, which only the ACL tree shows
(``GET /access/acl``, complete with Sys.Audit on /access). Without that tree "it inherits" is "cannot
tell", and a single path's exact answer (``GET /access/permissions?path=...``) settles it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# RPCEnvironment.pm get_effective_permissions: paths always computed (left out only without any privilege)
DEFAULT_PATHS = frozenset({"/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms"})


@dataclass(frozen=True)
class Filter:
    """How one PVE list filters its rows by the caller's privileges.

    ``path`` is the ACL path of a row's object with ``{id}`` for the row's id (``/storage/{id}``); without
    ``{id}`` it gates the whole list (PVE answers 403, or only the caller's own rows). Any one of
    ``privileges`` there shows the row. ``one`` names one object ("storage"), ``rows`` the list's rows
    ("storages"), ``listing`` the API list.
    """

    listing: str
    path: str
    privileges: tuple[str, ...]
    one: str
    rows: str
    pve: str

    @property
    def gate(self) -> bool:
        return "{id}" not in self.path

    @property
    def root(self) -> str:
        """The path whose privilege (propagated) shows every row: ``/storage`` for ``/storage/{id}``."""
        return self.path.split("/{id}", 1)[0] or "/"

    def at(self, ident: object = None) -> str:
        return self.path if self.gate or ident is None else self.path.replace("{id}", str(ident))

    def needs(self, ident: object = None) -> str:
        """``Datastore.Audit or Datastore.AllocateSpace on /storage/ceph-vm`` (``<id>`` without an id)."""
        where = self.path.replace("{id}", "<id>") if ident is None else self.at(ident)
        return f"{' or '.join(self.privileges)} on {where}"

    def subject(self, ident: object = None) -> str:
        """What is hidden: ``storage ceph-vm``, or the list's rows."""
        return f"{self.one} {ident}" if ident is not None and not self.gate else self.rows

    def reason(self, ident: object = None) -> str:
        """Why: the words every "not visible to this token" statement carries, with the privilege that shows it."""
        if ident is not None or self.gate:
            it = "it" if ident is not None and not self.gate else "them"
            return f"not visible to this token: PVE lists {it} only with {self.needs(ident)} ({self.listing})"
        return f"not all visible to this token: PVE lists each only with {self.needs()} ({self.listing})"

    def hidden(self, ident: object = None) -> str:
        """The whole sentence: ``storage ceph-vm is not visible to this token: PVE lists it only with ...``."""
        verb = "is" if ident is not None and not self.gate else "are"
        return f"{self.subject(ident)} {verb} {self.reason(ident)}"


_STORAGE_PRIVS = ("Datastore.Audit", "Datastore.AllocateSpace")
_SDN_PRIVS = ("SDN.Audit", "SDN.Allocate")
_MAPPING_PRIVS = ("Mapping.Audit", "Mapping.Use", "Mapping.Modify")
_STORAGE_INDEX = "pve-storage src/PVE/API2/Storage/Config.pm index"

# Every filtered list a check, the collector or the planner reads; each cites the function that filters.
STORAGE = Filter("/storage", "/storage/{id}", _STORAGE_PRIVS, "storage", "storages", _STORAGE_INDEX)
NODE_STORAGE = Filter(
    "/nodes/{node}/storage",
    "/storage/{id}",
    _STORAGE_PRIVS,
    "storage",
    "storages",
    "pve-storage src/PVE/API2/Storage/Status.pm index",
)
GUESTS = Filter(
    "/cluster/resources",
    "/vms/{id}",
    ("VM.Audit",),
    "guest",
    "guests",
    "pve-manager PVE/API2/Cluster.pm resources (type vm)",
)
STORAGE_ROWS = Filter(
    "/cluster/resources",
    "/storage/{id}",
    ("Datastore.Audit",),
    "status of storage",
    "storage status rows",
    "pve-manager PVE/API2/Cluster.pm resources (type storage: Datastore.Audit alone)",
)
NODE_FIGURES = Filter(
    "/cluster/resources",
    "/nodes/{id}",
    ("Sys.Audit",),
    "memory, CPU and disk figures of node",
    "node figures (memory, CPU, disk)",
    "pve-manager PVE/API2/Cluster.pm resources, PVE/API2Tools.pm extract_node_stats (the row stays, its figures go)",
)
POOLS = Filter("/pools", "/pool/{id}", ("Pool.Audit",), "pool", "pools", "pve-manager PVE/API2/Pool.pm index")
GUEST_POOL = Filter(
    "/cluster/resources",
    "/pool/{id}",
    ("Pool.Audit",),
    "membership of guests in pool",
    "guests' pool memberships",
    "pve-manager PVE/API2/Cluster.pm resources (a guest's pool field, and the pool rows)",
)
CLUSTER_STATUS = Filter(
    "/cluster/status",
    "/",
    ("Sys.Audit",),
    "cluster status",
    "cluster membership and quorum rows",
    "pve-manager PVE/API2/Cluster.pm get_status",
)
CLUSTER_TASKS = Filter(
    "/cluster/tasks",
    "/",
    ("Sys.Audit",),
    "cluster task",
    "cluster tasks",
    "pve-manager PVE/API2/Cluster.pm tasks (without it only the caller's own, and none of a token's)",
)
NODE_TASKS = Filter(
    "/nodes/{node}/tasks",
    "/nodes/{id}",
    ("Sys.Audit",),
    "other users' tasks on node",
    "other users' tasks",
    "pve-manager PVE/API2/Tasks.pm node_tasks (without it only the caller's own)",
)
BACKUP_JOBS = Filter(
    "/cluster/backup", "/", ("Sys.Audit",), "backup job", "backup jobs", "pve-manager PVE/API2/Backup.pm index"
)
NOT_BACKED_UP = Filter(
    "/cluster/backup-info/not-backed-up",
    "/",
    ("Sys.Audit",),
    "guest without backup job",
    "guests without a backup job",
    "pve-manager PVE/API2/Cluster/BackupInfo.pm get_guests_not_in_backup",
)
HA = Filter(
    "/cluster/ha",
    "/",
    ("Sys.Audit",),
    "HA resource",
    "HA resources, groups, rules and status",
    "pve-ha-manager src/PVE/API2/HA/Resources.pm, Groups.pm, Rules.pm, Status.pm",
)
REPLICATION = Filter(
    "/cluster/replication",
    "/vms/{id}",
    ("VM.Audit",),
    "replication jobs of guest",
    "replication jobs",
    "pve-manager PVE/API2/ReplicationConfig.pm index, PVE/API2/Replication.pm status",
)
SDN_ZONES = Filter(
    "/cluster/sdn/zones", "/sdn/zones/{id}", _SDN_PRIVS, "SDN zone", "SDN zones", "pve-network SDN/Zones.pm index"
)
SDN_VNETS = Filter(
    "/cluster/sdn/vnets",
    "/sdn/zones/{id}",
    _SDN_PRIVS,
    "SDN vnet (zone/vnet)",
    "SDN vnets",
    "pve-network SDN/Vnets.pm index",
)
SDN_CONTROLLERS = Filter(
    "/cluster/sdn/controllers",
    "/sdn/controllers/{id}",
    _SDN_PRIVS,
    "SDN controller",
    "SDN controllers",
    "pve-network SDN/Controllers.pm index",
)
CLUSTER_LOG = Filter(
    "/cluster/log",
    "/",
    ("Sys.Syslog",),
    "cluster log entry",
    "other users' cluster log entries",
    "pve-manager PVE/API2/Cluster.pm log (else own entries)",
)
ACL = Filter(
    "/access/acl",
    "/access",
    ("Sys.Audit",),
    "ACL entry",
    "ACL entries",
    "pve-access-control API2/ACL.pm read_acl (else entries where the caller has Permissions.Modify)",
)
USERS = Filter(
    "/access/users",
    "/access/groups/{id}",
    ("Sys.Audit", "User.Modify"),
    "users of group",
    "users",
    "pve-access-control API2/User.pm index, RPCEnvironment.pm filter_groups",
)
GROUPS = Filter(
    "/access/groups",
    "/access/groups/{id}",
    ("Sys.Audit", "User.Modify", "Group.Allocate"),
    "group",
    "groups",
    "pve-access-control API2/Group.pm index",
)


def mapping_filter(kind: str) -> Filter:
    """/cluster/mapping/{pci,usb,dir}: a mapping with Mapping.Audit, .Use or .Modify on /mapping/<kind>/<id>."""
    return Filter(
        f"/cluster/mapping/{kind}",
        f"/mapping/{kind}/{{id}}",
        _MAPPING_PRIVS,
        f"{kind} mapping",
        f"{kind} mappings",
        f"pve-manager PVE/API2/Cluster/Mapping/{kind.upper() if kind != 'dir' else 'Dir'}.pm index",
    )


class Visibility:
    """The caller's privileges as what PVE's filtered lists show it (see the module's docstring).

    :meth:`everything` is a caller that sees all (root@pam, and the analysis of fixtures that do not say);
    :meth:`unread` a caller whose privileges could not be read: nothing about what it sees can be told.
    """

    def __init__(
        self,
        perms: Mapping[str, Mapping[str, Any]] | None,
        *,
        acl_paths: Iterable[str] | None = None,
        unread: str | None = None,
        everything: bool = False,
    ) -> None:
        self._perms = {p: frozenset(k for k, v in privs.items() if v) for p, privs in (perms or {}).items()}
        self._read = perms is not None
        self._acl = frozenset(p.rstrip("/") or "/" for p in acl_paths) if acl_paths is not None else None
        self._exact: dict[str, frozenset[str]] = {}
        self._whole: dict[Filter, bool | None] = {}  # asked per guest by some checks: one pass over the map each
        self.unread_reason = unread
        self.everything_seen = everything

    @classmethod
    def everything(cls) -> Visibility:
        return cls(None, everything=True)

    @classmethod
    def unreadable(cls, why: str) -> Visibility:
        return cls(None, unread=why)

    def learn(self, path: str, privileges: Mapping[str, Any]) -> None:
        """An exact answer for one path (``GET /access/permissions?path=...``)."""
        self._exact[path] = frozenset(k for k, v in privileges.items() if v)
        self._whole.clear()

    @property
    def tree_known(self) -> bool:
        """Whether the ACL tree was read whole: only then is an unlisted path known to inherit."""
        return self._acl is not None

    def holds(self, path: str, privileges: Iterable[str]) -> bool | None:
        """Whether the caller holds any of ``privileges`` on ``path``; None when it cannot be told."""
        if self.everything_seen:
            return True
        wanted = set(privileges)
        if path in self._exact:
            return bool(wanted & self._exact[path])
        if not self._read:
            return None
        at = path.rstrip("/") or "/"
        first = True
        while True:
            listed = self._perms.get(at)
            if listed is not None:
                if not wanted & listed:
                    return False  # the object would need its own ACL entry, which would list it
                return True if first or self.tree_known else None
            if at in DEFAULT_PATHS or (self._acl is not None and at in self._acl):
                return False  # always computed (or in the ACL tree), left out: no privilege at all there
            if at == "/":
                return False
            at, first = at.rsplit("/", 1)[0] or "/", False

    def sees(self, f: Filter, ident: object = None) -> bool | None:
        """Whether the caller sees the row of object ``ident`` (a gate: the list) in ``f``'s list."""
        return self.holds(f.at(ident), f.privileges)

    def whole(self, f: Filter) -> bool | None:
        """Whether ``f``'s list shows this caller every row: False when some row is hidden, None when it
        cannot be told (own privileges unread, or a hidden row would show only in the unread ACL tree)."""
        if f not in self._whole:
            self._whole[f] = self._whole_list(f)
        return self._whole[f]

    def _whole_list(self, f: Filter) -> bool | None:
        if f.gate or self.everything_seen:
            return self.holds(f.path, f.privileges)
        root = self.holds(f.root, f.privileges)
        if root is False:
            return False
        below = f.root.rstrip("/") + "/"
        privs = set(f.privileges)
        known = {**self._perms, **self._exact}
        if any(p.startswith(below) and not privs & listed for p, listed in known.items()):
            return False
        if self._acl is not None and any(p.startswith(below) and p not in known for p in self._acl):
            return False  # an ACL path under the root, left out of the map: no privilege there
        return root if self.tree_known or root is None else None

    def undecided(self, f: Filter, idents: Iterable[object]) -> list[str]:
        """The object paths among ``idents`` whose visibility needs a single-path read."""
        return [f.at(i) for i in idents if self.sees(f, i) is None]
