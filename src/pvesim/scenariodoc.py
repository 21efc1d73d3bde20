"""docs/scenarios.md rendered from the scenario format's models (pvesim/scenarioschema.py): one table per
section, each key with its type, default and meaning. ``pvesim docs`` writes it; a test fails when it is stale."""

from __future__ import annotations

import json
from typing import Any, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from pvesim import scenarioschema

HEADER = """# The scenario format

A scenario is a YAML file (or a dict) describing a simulated Proxmox VE cluster: `pvesim serve --scenario
<name or path>` serves it, `pvesim.build_cluster(data)` builds it in process. The built-in scenarios are in
`src/pvesim/scenarios/` (`pvesim scenarios` lists them); `pvesim generate` writes large ones.

Values keep PVE's own notation: sizes as PVE writes them (`32G`, `512M`) or bytes; ages relative to the
simulator's clock, with combined units as in `6d59m` or `1h30m` (`-5m` is five minutes ahead); guest configs,
storage.cfg options, datacenter.cfg options and jobs.cfg sections in PVE's keys. A key this page does not list
is refused when the scenario is loaded, with its place in the file.

This page is generated from `src/pvesim/scenarioschema.py` by `pvesim docs`; do not edit it by hand.
"""


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map {_type_name(args[0])} → {_type_name(args[1])}"
    if args:
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    names = {str: "text", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)).replace("Any", "any"))


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default
    if value is PydanticUndefined or value is None:
        return ""
    if isinstance(value, BaseModel):
        return ""
    if value in ({}, [], ""):
        return "" if value == "" else f"`{json.dumps(value)}`"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return ""
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """Every model reachable from the root, in the order they are first met."""
    seen: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for field in model.model_fields.values():
            for sub in _nested(field.annotation):
                visit(sub)

    visit(root)
    return seen


def _nested(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _nested(arg)]


def render() -> str:
    parts = [HEADER]
    for model in _models(scenarioschema.Scenario):
        doc = " ".join(line.strip() for line in (model.__doc__ or "").strip().splitlines())
        if model.__module__ != scenarioschema.__name__:  # the fault models: set at run time too
            doc = doc or "Fault injection (`src/pvesim/faults.py`), also set at run time by `PUT /_sim/faults`."
        parts.append(f"\n## {model.__name__}\n\n{doc}\n" if doc else f"\n## {model.__name__}\n")
        if model.model_config.get("extra") == "allow":
            parts.append("Keys beyond these are kept as they are.\n")
        parts.append("\n| key | type | default | meaning |\n|---|---|---|---|")
        for name, field in model.model_fields.items():
            key = field.alias or name
            meaning = (field.description or "").replace("|", "/")
            parts.append(f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | {meaning} |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
