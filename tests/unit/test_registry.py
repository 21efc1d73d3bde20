"""tools.yaml and the handlers must agree; any mismatch stops the server with a clear message.

Write-ness is code: a tools file that tries to set a tier, annotations, toolset or handler is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pve_steward.security.guard import guarded
from pve_steward.security.handlers import HANDLERS
from pve_steward.security.tiers import Tier
from pve_steward.surface.registry import DEFINITIONS_VERSION, Registry, RegistryError, load_registry, read_tools_file
from pve_steward.tools.context import ToolContext

PACKAGED = Path(__file__).resolve().parents[2] / "src" / "pve_steward" / "tools.yaml"


def _spec() -> dict:
    return yaml.safe_load(PACKAGED.read_text())


def _op(spec: dict, name: str) -> dict:
    return next(o for o in spec["operations"] if o["name"] == name)


def _write(tmp_path: Path, spec: dict) -> Path:
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_packaged_definitions_match_the_code() -> None:
    reg = load_registry()
    assert set(reg.operations) and all(op.name in reg.handlers for op in reg.operations.values())
    assert set(HANDLERS) == {op.handler for op in reg.operations.values()}


def test_override_file_with_same_versions_loads(tmp_path: Path) -> None:
    spec = _spec()
    spec["operations"][0]["description"] = "A custom description for this deployment."
    reg = load_registry(_write(tmp_path, spec))
    assert reg.operations[spec["operations"][0]["name"]].description.startswith("A custom")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.update(schema_version=2), "schema_version 2"),
        (lambda s: s.update(definitions_version="1999.1.1"), "definitions_version '1999.1.1'"),
        (lambda s: s["operations"][0].update(name="no_such_handler"), "no_such_handler: no handler of that name"),
        (lambda s: _op(s, "get_guest")["parameters"].pop("vmid"), "lists parameters"),
        (lambda s: s["operations"].pop(0), "has no description in the tools file"),
        (lambda s: s["toolsets"].pop("tasks"), "toolset 'tasks' has no title"),
        (lambda s: s["toolsets"].update(extra={"title": "x", "description": "no handler uses it"}), "'extra'"),
        (lambda s: _op(s, "get_guest").update(colour="red"), "operation 'get_guest' has unknown key 'colour'"),
    ],
)
def test_mismatches_refuse_to_load(tmp_path: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    spec = _spec()
    mutate(spec)
    with pytest.raises(RegistryError, match=message):
        load_registry(_write(tmp_path, spec))


def test_unguarded_handler_cannot_be_registered() -> None:
    async def sneaky(t: ToolContext) -> None:
        return None

    spec = read_tools_file()
    handlers = dict(HANDLERS)
    op = spec.operations[0]
    handlers[op.name] = sneaky
    with pytest.raises(RegistryError, match="is not wrapped in @guarded"):
        Registry(spec, handlers)


def test_an_operation_cannot_be_bound_to_another_handler() -> None:
    handlers = dict(HANDLERS)
    handlers["guest_start"] = HANDLERS["guest_stop"]
    with pytest.raises(RegistryError, match="guest_start: bound to handler 'guest_stop'"):
        Registry(read_tools_file(), handlers)


def test_guarded_refuses_duplicate_names() -> None:
    async def cluster_overview(t: ToolContext) -> None:
        return None

    with pytest.raises(RuntimeError, match="two tool handlers"):
        guarded(toolset="cluster")(cluster_overview)


def test_select_filters_in_a_documented_order() -> None:
    reg = load_registry()
    every = reg.select(tier=Tier.ADMIN, read_only=False)
    assert [o.name for o in every] == sorted((o.name for o in every), key=lambda n: (reg.operations[n].toolset, n))
    only = reg.select(tier=Tier.ADMIN, read_only=False, toolsets=["tasks"])
    assert {o.toolset for o in only} == {"tasks"}
    without = reg.select(tier=Tier.ADMIN, read_only=False, disabled=["tasks"])
    assert "tasks" not in {o.toolset for o in without}
    assert all(not o.is_write for o in reg.select(tier=Tier.ADMIN, read_only=True))
    with pytest.raises(RegistryError, match="unknown toolset"):
        reg.select(tier=Tier.ADMIN, read_only=False, toolsets=["nope"])


def test_versions_are_exact() -> None:
    assert read_tools_file().definitions_version == DEFINITIONS_VERSION


CODE_OWNED = [
    ("guest_stop", {"annotations": {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}}),
    ("guest_stop", {"tier": "read_only"}),
    ("guest_stop", {"tier": "operator"}),
    ("guest_stop", {"handler": "guest_start"}),
    ("guest_stop", {"toolset": "planning"}),
    ("guest_reset", {"read_only": True}),
]


@pytest.mark.parametrize(("name", "change"), CODE_OWNED, ids=str)
def test_a_tools_file_cannot_change_what_an_operation_is(tmp_path: Path, name: str, change: dict) -> None:
    """Marking guest_stop read-only, lowering its tier or re-binding it is refused, naming key and operation."""
    spec = _spec()
    _op(spec, name).update(change)
    key = next(iter(change))
    with pytest.raises(RegistryError, match=f"operation '{name}' sets '{key}', which the code decides"):
        load_registry(_write(tmp_path, spec))


def test_a_tools_file_cannot_rename_a_write_tool(tmp_path: Path) -> None:
    spec = _spec()
    spec["write_tools"]["admin"]["name"] = "status"
    with pytest.raises(RegistryError, match="write tool 'admin' sets 'name'"):
        load_registry(_write(tmp_path, spec))


def test_swapping_descriptions_does_not_move_write_ness(tmp_path: Path) -> None:
    """Only words move: guest_stop keeps its code-declared tier and hints whatever the file says."""
    spec = _spec()
    stop, start = _op(spec, "guest_stop"), _op(spec, "get_guest")
    stop["description"], start["description"] = start["description"], stop["description"]
    reg = load_registry(_write(tmp_path, spec))
    op = reg.operations["guest_stop"]
    assert (op.tier, op.is_write, op.annotations.destructive) == (Tier.ADMIN, True, True)
    assert reg.handlers["guest_stop"].__name__ == "guest_stop"
    assert all(not o.is_write for o in reg.select(tier=Tier.ADMIN, read_only=True))


def test_server_start_refuses_a_tools_file_that_marks_a_write_read_only(tmp_path: Path) -> None:
    from pve_steward.config import Settings
    from pve_steward.server import build_server
    from pve_steward.testing import FakeClient

    spec = _spec()
    _op(spec, "guest_stop")["annotations"] = {"read_only": True}
    settings = Settings(read_only=True, tools_file=_write(tmp_path, spec), audit_log=tmp_path / "audit.jsonl")
    with pytest.raises(RegistryError, match="'guest_stop' sets 'annotations'"):
        build_server(settings, client=FakeClient({}), check_version_on_start=False)


class _Claimed:
    """An operation description that lies: it calls guest_stop a read."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.is_write = False
        self.tier = Tier.READ_ONLY


@pytest.mark.anyio
@pytest.mark.parametrize(("claimed", "reason"), [("guest_stop", "is a write"), ("get_guest", "cannot be re-bound")])
async def test_the_guard_decides_by_the_handlers_declaration(tmp_path: Path, claimed: str, reason: str) -> None:
    from pve_steward.config import Settings
    from pve_steward.security.audit import AuditLog
    from pve_steward.security.guard import Refused
    from pve_steward.security.tokens import TokenSigner
    from pve_steward.testing import FakeClient
    from pve_steward.tools.context import AppContext

    client = FakeClient({})
    app = AppContext(
        settings=Settings(read_only=True),
        client=client,
        audit=AuditLog(tmp_path / "audit.jsonl"),
        signer=TokenSigner(b"k" * 32),
    )
    with pytest.raises(Refused, match=reason):
        await load_registry().handlers["guest_stop"](ToolContext(app=app, op=_Claimed(claimed)), vmid=100)
    assert client.calls == []
