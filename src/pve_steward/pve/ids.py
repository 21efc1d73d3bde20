"""PVE identifiers, validated against PVE's own formats before they reach a request.

Each is an ``Annotated`` type usable as a tool parameter (the MCP input schema then carries the
pattern and bounds) and as a path segment in :mod:`pve_steward.pveio.client`, which refuses
anything that does not validate. The formats follow pve-common's JSONSchema registry
(``pve-node``, ``pve-vmid``, ``pve-storage-id``, ``pve-configid``) and PVE's UPID syntax.
"""

from __future__ import annotations

import re
import types
import typing
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

NODE_RE = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")
STORAGE_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]$")
SNAPSHOT_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{1,39}$")
# pve-common src/PVE/UPID.pm decode: the same groups. Python's fullmatch also refuses the trailing
# newline Perl's '$' would let through, and check_upid refuses control characters PVE's [^:\s/] allows.
UPID_RE = re.compile(
    r"^UPID:(?P<node>[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):(?P<pid>[0-9A-Fa-f]{8}):(?P<pstart>[0-9A-Fa-f]{8,9}):"
    r"(?P<starttime>[0-9A-Fa-f]{8}):(?P<type>[^:\s/]+):(?P<id>[^:\s/]*):(?P<user>[^:\s/]+):$"
)
HA_SID_RE = re.compile(r"^(?P<type>vm|ct):(?P<vmid>[1-9][0-9]{2,8})$")
REPLICATION_ID_RE = re.compile(r"^[1-9][0-9]{2,8}-\d{1,9}$")
BACKUP_JOB_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_\-]{1,63}$")
VMID_MIN, VMID_MAX = 100, 999_999_999
VMID_RULE = f"guest ids are integers from {VMID_MIN} to {VMID_MAX}"
MAX_INT_DIGITS = 18
MAX_ID_LEN = 128


class InvalidIdentifier(ValueError):
    """A value that is not a valid PVE identifier; names the parameter."""

    def __init__(self, param: str, value: object, why: str) -> None:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "...'"
        super().__init__(f"invalid {param} {shown}: {why}")
        self.param = param

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole: it crosses from the diagnostics process to the front end's guard (worker/)."""
        return (_invalid, (self.param, str(self)))


def _invalid(param: str, text: str) -> InvalidIdentifier:
    exc = InvalidIdentifier.__new__(InvalidIdentifier)
    ValueError.__init__(exc, text)
    exc.param = param
    return exc


def _check(rx: re.Pattern[str], param: str, why: str) -> AfterValidator:
    def validate(value: str) -> str:
        if len(value) > MAX_ID_LEN or not rx.fullmatch(value):
            raise InvalidIdentifier(param, value, why)
        return value

    return AfterValidator(validate)


def check_node(value: str, param: str = "node") -> str:
    if not isinstance(value, str) or len(value) > MAX_ID_LEN or not NODE_RE.fullmatch(value):
        raise InvalidIdentifier(param, value, "node names are 1-63 letters, digits and inner hyphens")
    return value


def check_vmid(value: int, param: str = "vmid") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not VMID_MIN <= value <= VMID_MAX:
        raise InvalidIdentifier(param, value, VMID_RULE)
    return value


def whole_number(value: Any, param: str = "value") -> Any:
    """The one reading of an integer parameter, wherever it comes from (tool arguments, prompt arguments,
    completion context, resource URIs): an int, an integral float, or a string of the digits 0-9 only
    (no sign, no spaces, no other digit characters such as '²' or '١', at most 18 of them), as an int.
    Anything else is an :class:`InvalidIdentifier` naming the parameter; None passes (an absent value)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, str) and 0 < len(value) <= MAX_INT_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    raise InvalidIdentifier(param, value, "expected a whole number written with the digits 0-9 (no sign or spaces)")


def parse_vmid(value: Any, param: str = "vmid") -> int:
    """A guest id from any input (``whole_number``), in PVE's range."""
    if value is None:
        raise InvalidIdentifier(param, value, VMID_RULE)
    number = whole_number(value, param) if not isinstance(value, str) or len(value) <= 9 else None
    if number is None:
        raise InvalidIdentifier(param, value, VMID_RULE)
    return check_vmid(number, param)


def integer_input(annotation: Any, param: str) -> Any:
    """A tool parameter's type with :func:`whole_number` in front when it takes an integer (so every integer
    argument is read by the one rule, and its error names the parameter); other types are returned as given."""
    if not _takes_int(annotation):
        return annotation
    return Annotated[annotation, BeforeValidator(lambda value: whole_number(value, param))]


def _takes_int(annotation: Any) -> bool:
    if annotation is int:
        return True
    if typing.get_origin(annotation) is Annotated:
        return _takes_int(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_takes_int(arg) for arg in typing.get_args(annotation))
    return False


def check_storage(value: str, param: str = "storage") -> str:
    if not isinstance(value, str) or len(value) > MAX_ID_LEN or not STORAGE_RE.fullmatch(value):
        raise InvalidIdentifier(param, value, "storage ids start with a letter; letters, digits, - _ . allowed")
    return value


def check_snapshot(value: str, param: str = "snapshot") -> str:
    if not isinstance(value, str) or not SNAPSHOT_RE.fullmatch(value) or value in ("current", "pending"):
        raise InvalidIdentifier(
            param,
            value,
            "snapshot names are 2-40 letters, digits and _, starting with a "
            "letter ('current' and 'pending' are reserved)",
        )
    return value


def check_upid(value: str, param: str = "upid") -> str:
    """PVE's UPID grammar (pve-common PVE/UPID.pm decode), with no control character anywhere."""
    if not isinstance(value, str) or len(value) > 512 or not UPID_RE.fullmatch(value):
        raise InvalidIdentifier(param, value, "expected a PVE task id 'UPID:node:pid:pstart:starttime:type:id:user:'")
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidIdentifier(param, value, "a task id never contains control characters")
    return value


def check_ha_sid(value: str, param: str = "sid") -> str:
    if not isinstance(value, str) or not HA_SID_RE.fullmatch(value):
        raise InvalidIdentifier(param, value, "HA resource ids look like 'vm:100' or 'ct:200'")
    return value


def check_replication_id(value: str, param: str = "job") -> str:
    if not isinstance(value, str) or not REPLICATION_ID_RE.fullmatch(value):
        raise InvalidIdentifier(param, value, "replication job ids look like '100-0'")
    return value


def check_backup_job(value: str, param: str = "id") -> str:
    if not isinstance(value, str) or not BACKUP_JOB_RE.fullmatch(value):
        raise InvalidIdentifier(param, value, "backup job ids start with a letter, then letters, digits, - or _")
    return value


def _schema(pattern: str, min_length: int | None = None, max_length: int | None = None) -> Any:
    """Publish the pattern in the JSON schema; enforcement is our validator (clearer messages)."""
    return Field(json_schema_extra={"pattern": pattern}, min_length=min_length, max_length=max_length)


NodeName = Annotated[str, _schema(NODE_RE.pattern, min_length=1, max_length=63), AfterValidator(check_node)]
VmId = Annotated[int, Field(ge=VMID_MIN, le=VMID_MAX), AfterValidator(check_vmid), BeforeValidator(parse_vmid)]
StorageId = Annotated[
    str, _schema(STORAGE_RE.pattern, min_length=2, max_length=MAX_ID_LEN), AfterValidator(check_storage)
]
SnapshotName = Annotated[str, _schema(SNAPSHOT_RE.pattern, min_length=2, max_length=40), AfterValidator(check_snapshot)]
Upid = Annotated[str, _schema(UPID_RE.pattern, max_length=512), AfterValidator(check_upid)]
HaSid = Annotated[str, _schema(HA_SID_RE.pattern, max_length=12), AfterValidator(check_ha_sid)]
ReplicationJobId = Annotated[
    str, _schema(REPLICATION_ID_RE.pattern, max_length=20), AfterValidator(check_replication_id)
]
BackupJobId = Annotated[str, _schema(BACKUP_JOB_RE.pattern, max_length=64), AfterValidator(check_backup_job)]


@dataclass(frozen=True)
class UpidInfo:
    node: str
    pid: int
    starttime: int
    type: str
    id: str
    user: str


def parse_upid(upid: str) -> UpidInfo:
    m = UPID_RE.fullmatch(check_upid(upid))
    assert m is not None
    return UpidInfo(
        node=m["node"],
        pid=int(m["pid"], 16),
        starttime=int(m["starttime"], 16),
        type=m["type"],
        id=m["id"],
        user=m["user"],
    )
