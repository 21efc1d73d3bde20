"""tools.yaml and the handlers must agree; any mismatch stops the server with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pve_steward.registry import DEFINITIONS_VERSION, Registry, RegistryError, load_registry, read_tools_file
from pve_steward.security.guard import HANDLERS, guarded
from pve_steward.security.tiers import Tier
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
        (lambda s: s["operations"][0].update(handler="no_such_handler"), "handler 'no_such_handler' does not exist"),
        (lambda s: _op(s, "get_guest")["parameters"].pop("vmid"), "lists parameters"),
        (lambda s: s["operations"].pop(0), "is not named by any operation"),
        (lambda s: s["operations"][0]["annotations"].pop("idempotent"), "idempotent"),
        (lambda s: s["operations"][0].update(tier="admin"), "must have tier read_only"),
        (lambda s: s["operations"][0].update(toolset="nope"), "unknown toolset 'nope'"),
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
    handlers[op.handler] = sneaky
    with pytest.raises(RegistryError, match="is not wrapped in @guarded"):
        Registry(spec, handlers)


def test_guarded_refuses_duplicate_names() -> None:
    async def cluster_overview(t: ToolContext) -> None:
        return None

    with pytest.raises(RuntimeError, match="two tool handlers"):
        guarded(cluster_overview)


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
