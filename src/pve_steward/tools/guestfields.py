"""Config fields of many guests in one call (list_guests ``fields``): each guest's config read once, all of
them concurrently through the client's bounded pool, secret values redacted as get_guest redacts them, long
values cut, and the page shortened where the answer would pass its size budget (design record 261206-56).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from pve_steward.errors import PveError
from pve_steward.pve.guestconfig import redact
from pve_steward.pveio.client import ApiPath, ProxmoxClient, api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import vmid as vmid_seg

# A config key as PVE names them (onboot, tags, agent, net0, ipconfig0, scsi1, lxc.apparmor.profile ...)
ConfigKey = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")]
MAX_FIELDS = 16
FIELD_PAGE = 200  # guests per page when their configs are read (a read each)
VALUE_LIMIT = 200  # characters of one value in a row; get_guest shows the whole config
# bytes of the rows' config values in one answer: with the rows themselves (about 150 bytes each) the text
# stays under the 100 KB an answer may take (tests/integration/test_answer_size.py)
FIELDS_BUDGET = 60_000
_MARKING = 32  # what marking a value as cluster text adds on the wire, about


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > VALUE_LIMIT:
        return value[:VALUE_LIMIT] + " …[truncated: get_guest shows it whole]"
    return value


def _size(values: dict[str, Any]) -> int:
    return sum(len(k) + len(str(v)) + _MARKING for k, v in values.items())


async def config_fields(
    client: ProxmoxClient, rows: list[dict[str, Any]], fields: list[str]
) -> tuple[list[dict[str, Any] | None], dict[int, str]]:
    """Per row (a /cluster/resources guest row), the asked ``fields`` of its config (None where unset), and by
    vmid the error of each read that failed (that row's values are then None). The caller keeps only as many
    rows as :func:`within_budget` allows."""
    reads: list[tuple[str, ApiPath, dict[str, Any]]] = [
        (
            str(r["vmid"]),
            api_path("nodes", node_seg(str(r["node"])), str(r["type"]), vmid_seg(int(r["vmid"])), "config"),
            {},
        )
        for r in rows
    ]
    got = await gather(client, reads, read_only=True)
    values: list[dict[str, Any] | None] = []
    errors: dict[int, str] = {}
    for key, _path, _params in reads:
        answer = got[key]
        if isinstance(answer, PveError):
            values.append(None)
            errors[int(key)] = answer.message
            continue
        shown = redact({f: answer.get(f) for f in fields})
        values.append({f: _cut(v) for f, v in shown.items()})
    return values, errors


def within_budget(values: list[dict[str, Any] | None]) -> int:
    """How many of the rows (at least one) fit the answer's budget for config values."""
    used = 0
    for i, row in enumerate(values):
        used += _size(row or {})
        if used > FIELDS_BUDGET and i:
            return i
    return len(values)
