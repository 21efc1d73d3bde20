"""Our own error hierarchy for talking to PVE, so no caller ever handles proxmoxer or requests types.

Each error carries a message a model and a human can act on; :func:`advice` adds the fix.
"""

from __future__ import annotations

import re

# What reading a value of unexpected type or form raises (int("x"), .get on a string, a missing key).
# Cluster data can be malformed (a proxy, a plugin, a damaged config): reports and tools name it as
# such instead of passing the raw exception text on. Anything else is a bug and propagates.
MALFORMED_VALUE_ERRORS: tuple[type[Exception], ...] = (
    ArithmeticError,
    AttributeError,
    LookupError,
    TypeError,
    ValueError,
)

_PERM = re.compile(r"Permission check failed \((?P<path>[^,]+), (?P<priv>[^)]+)\)")

# Which built-in role grants a privilege, for actionable permission errors.
_ROLE_FOR = {
    "VM.Audit": "PVEAuditor",
    "Sys.Audit": "PVEAuditor",
    "Datastore.Audit": "PVEAuditor",
    "VM.PowerMgmt": "PVEVMUser",
    "VM.Backup": "PVEVMUser",
    "VM.Console": "PVEVMUser",
    "VM.Migrate": "PVEVMAdmin",
    "VM.Replicate": "PVEVMAdmin",
    "VM.Snapshot": "PVEVMAdmin",
    "VM.Snapshot.Rollback": "PVEVMAdmin",
    "VM.Config.Options": "PVEVMAdmin",
    "Datastore.AllocateSpace": "PVEDatastoreUser",
    "Sys.Console": "PVESysAdmin",
    "VM.GuestAgent.Audit": "PVEAuditor",
}
# Privileges no built-in role below Administrator holds (pve-access-control AccessControl.pm: the "root" group of
# Sys). Granting Administrator for one of them would hand out every privilege: a role of its own is advised.
_OWN_ROLE = {"Sys.Modify": "SysModify", "Sys.PowerMgmt": "SysPowerMgmt", "Sys.Incoming": "SysIncoming"}


class PveError(Exception):
    """Base class: something went wrong talking to the Proxmox VE API (or, with ``service`` "PBS", to the
    Proxmox Backup Server's, which the same client speaks)."""

    status: int | None = None
    service: str = "PVE"  # which API answered: the client that maps the failure sets it

    def __init__(self, message: str, *, status: int | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.path = path


class PveAuthError(PveError):
    """401: the API token is wrong, expired or revoked."""


class PvePermissionError(PveError):
    """403: the token lacks a privilege on an ACL path."""

    def __init__(self, message: str, *, status: int | None = 403, path: str | None = None) -> None:
        super().__init__(message, status=status, path=path)
        m = _PERM.search(message)
        self.acl_path = m["path"] if m else None
        self.privilege = m["priv"] if m else None


class PveNotFound(PveError):
    """The object (guest, node, storage, task, method) does not exist."""


class PveParamError(PveError):
    """400: PVE rejected parameters; ``errors`` has its per-parameter messages."""

    def __init__(self, message: str, errors: dict[str, str] | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.errors = errors or {}


class PveUnavailable(PveError):
    """The cluster or a node could not be reached (connection refused, 595/596, dropped connection)."""


class PveTimeout(PveUnavailable):
    """No answer within the configured timeout."""


class PveConnectionRefused(PveUnavailable):
    """Nothing listens at the address: usually a wrong URL or port, or pveproxy is down."""


class PveUnknownHost(PveUnavailable):
    """The host name in the URL does not resolve."""


class PveTlsError(PveError):
    """TLS verification failed (unknown CA or certificate fingerprint mismatch)."""

    def __init__(
        self, message: str, *, status: int | None = None, path: str | None = None, presented: str | None = None
    ) -> None:
        super().__init__(message, status=status, path=path)
        self.presented = presented  # the SHA-256 fingerprint the server showed, when known


class PveApiError(PveError):
    """Any other failure PVE reported (usually HTTP 500 with a message)."""


def advice(err: PveError) -> str:
    """One sentence on how to fix it, for tool error messages: in PBS's own terms for a PBS failure."""
    pbs = err.service == "PBS"
    if isinstance(err, PvePermissionError) and err.privilege:
        return _pbs_grant(err, err.privilege) if pbs else _pve_grant(err, err.privilege)
    if isinstance(err, PveTlsError):
        return _tls_fix(err, pbs)
    for kind, pve_fix, pbs_fix in _FIXES:
        if isinstance(err, kind):
            return pbs_fix if pbs else pve_fix
    return ""


# (error type, PVE's fix, PBS's fix), most specific type first
_FIXES: tuple[tuple[type[PveError], str, str], ...] = (
    (
        PveAuthError,
        "check the API token id and secret (pveum user token list <user>@<realm>)",
        "check the PBS token id and secret (proxmox-backup-manager user list-tokens <user>@<realm>)",
    ),
    (
        PveConnectionRefused,
        "check the host and port in --url (the PVE API listens on 8006) and that pveproxy runs on the node",
        "check the host and port in --pbs-url (the PBS API listens on 8007) and that proxmox-backup-proxy runs",
    ),
    (
        PveUnknownHost,
        "check the host name in --url, or use the node's IP address",
        "check the host name in --pbs-url, or use the PBS host's IP address",
    ),
    (
        PveTimeout,
        "the API did not answer in time; raise --timeout or check the node",
        "PBS did not answer in time; raise --timeout or check the PBS host",
    ),
    (
        PveUnavailable,
        "the node or cluster is unreachable; check that it is online (pvecm status)",
        "the PBS host is unreachable; check that it is online and proxmox-backup-proxy runs",
    ),
)


def _pve_grant(err: PvePermissionError, privilege: str) -> str:
    privs = privilege.split("|")
    scope = err.acl_path or "/"
    parent = scope.rsplit("/", 1)[0] if scope.count("/") > 1 else scope
    own = _OWN_ROLE.get(privs[0])
    if own is not None:
        return (
            f"token lacks {privs[0]} on {scope}, which no built-in role short of Administrator holds: create a role "
            f"with only it and grant that on {parent} (pveum role add {own} --privs {privs[0]}; pveum acl modify "
            f"{parent} --tokens '<user>@<realm>!<token>' --roles {own}; with privilege separation grant the user too)"
        )
    role = _ROLE_FOR.get(privs[0], "a role with " + " or ".join(privs))
    return (
        f"token lacks {privilege} on {scope}: grant {role} on {parent} "
        f"(pveum acl modify {parent} --tokens '<user>@<realm>!<token>' --roles {role})"
    )


# Which PBS role grants a privilege (proxmox-backup docs/config/acl: the roles acl.cfg knows)
_PBS_ROLE_FOR = {"Datastore.Audit": "DatastoreAudit", "Sys.Audit": "Audit"}


def _pbs_grant(err: PvePermissionError, privilege: str) -> str:
    role = _PBS_ROLE_FOR.get(privilege, "a role with " + privilege)
    scope = err.acl_path or "/"
    return (
        f"the PBS token lacks {privilege} on {scope}: grant {role} "
        f"(proxmox-backup-manager acl update {scope} {role} --auth-id '<user>@<realm>!<token>')"
    )


def _tls_fix(err: PveTlsError, pbs: bool) -> str:
    """Pin the certificate (or give its CA) with the API's own settings; never a hint to turn verification off."""
    cert, pin, ca, host = (
        ("proxmox-backup-manager cert info", "--pbs-fingerprint", "--pbs-ca-file", "PBS")
        if pbs
        else ("pvenode cert info", "--fingerprint", "--ca-file", "node")
    )
    if err.presented:
        where = "the PBS host" if pbs else "the node"
        return (
            f"compare the presented fingerprint with `{cert}` on {where}; if it matches (say, after a "
            f"certificate renewal), pin it with {pin}"
        )
    return f"pin the {host} certificate with {pin} ({cert}) or give {ca}; verification is never silently disabled"


def connection_problem(url: str | None, err: PveError) -> str:
    """The first line a user sees when the server cannot use the cluster at start: what happened, then the fix."""
    hint = advice(err)
    if isinstance(err, PveAuthError | PvePermissionError):
        lead = f"Proxmox VE at {url} refused the API token"
    elif isinstance(err, PveUnavailable):
        lead = f"cannot reach Proxmox VE at {url}"
    elif isinstance(err, PveTlsError):
        lead = f"cannot trust Proxmox VE at {url}"
    else:
        lead = f"Proxmox VE at {url} answered with an error"
    return f"{lead}: {err.message}" + (f". Fix: {hint}" if hint else "")
