"""The operation registry: ``tools.yaml`` validated against the Python handlers.

``tools.yaml`` (packaged; ``--tools-file`` may override it) is the single source for every
operation's name, toolset, description, parameter descriptions, tier and annotations. The
handlers keep their typed signatures; loading checks both agree, and that the file's schema and
definitions versions are exactly the ones this code expects. Everything else is derived:
granular tools, meta-tools, the read-only and toolset filters, docs and schema snapshots.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pve_steward.security.tiers import Tier

SCHEMA_VERSION = 1
DEFINITIONS_VERSION = "2026.12.1"
_NAME = re.compile(r"^[a-z][a-z0-9_]{2,47}$")


class RegistryError(ValueError):
    """tools.yaml and the code disagree, or the file is malformed: the server must not start."""


class Annotations(BaseModel):
    """MCP tool hints; all four are required so 'unset' cannot be loaded."""

    model_config = ConfigDict(extra="forbid")
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


class Operation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    toolset: str
    title: str
    summary: str = Field(max_length=90, description="one line for the action list of a meta-tool")
    description: str = Field(min_length=10)
    handler: str = Field(description="function name in pve_steward.tools")
    tier: Tier
    annotations: Annotations
    parameters: dict[str, str] = Field(default_factory=dict, description="parameter -> description")

    @property
    def is_write(self) -> bool:
        return not self.annotations.read_only

    @model_validator(mode="after")
    def _consistent(self) -> Operation:
        if not _NAME.match(self.name):
            raise ValueError(f"operation name '{self.name}' must be snake_case, 3-48 chars")
        if self.annotations.read_only and self.tier is not Tier.READ_ONLY:
            raise ValueError(f"{self.name}: a read-only operation must have tier read_only")
        if not self.annotations.read_only and self.tier is Tier.READ_ONLY:
            raise ValueError(f"{self.name}: a write operation needs tier operator or admin")
        if self.annotations.read_only and self.annotations.destructive:
            raise ValueError(f"{self.name}: a read-only operation cannot be destructive")
        return self


class Toolset(BaseModel):
    """A domain: its operations become one read meta-tool and, if it has writes, one write meta-tool."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(max_length=40)
    description: str = Field(min_length=10, max_length=200)


class WriteTool(BaseModel):
    """The meta-tool holding every write of one tier (reads stay in truthfully read-only tools)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    title: str = Field(max_length=60)
    description: str = Field(min_length=10, max_length=300)


class ToolsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1]
    definitions_version: str
    toolsets: dict[str, Toolset]
    write_tools: dict[Tier, WriteTool]
    operations: list[Operation]


class Registry:
    """Validated operations, each bound to its guarded handler."""

    def __init__(self, spec: ToolsFile, handlers: dict[str, Callable[..., Any]]) -> None:
        self.spec = spec
        self.toolsets = dict(spec.toolsets)
        self.write_tools = dict(spec.write_tools)
        self.operations: dict[str, Operation] = {}
        self.handlers: dict[str, Callable[..., Any]] = {}
        errors: list[str] = []
        named: set[str] = set()
        for op in spec.operations:
            if op.name in self.operations:
                errors.append(f"operation '{op.name}' is defined twice")
            if op.toolset not in self.toolsets:
                errors.append(f"{op.name}: unknown toolset '{op.toolset}'")
            if op.is_write and op.tier not in self.write_tools:
                errors.append(f"{op.name}: no write_tools entry for tier {op.tier.value}")
            fn = handlers.get(op.handler)
            if fn is None:
                errors.append(f"{op.name}: handler '{op.handler}' does not exist")
                continue
            named.add(op.handler)
            if not getattr(fn, "__guarded__", False):
                errors.append(f"{op.name}: handler '{op.handler}' is not wrapped in @guarded")
            params = set(handler_parameters(fn))
            if params != set(op.parameters):
                errors.append(
                    f"{op.name}: tools.yaml lists parameters {sorted(op.parameters)} but the handler "
                    f"takes {sorted(params)}"
                )
            self.operations[op.name] = op
            self.handlers[op.name] = fn
        errors.extend(
            f"handler '{missing}' is not named by any operation in tools.yaml"
            for missing in sorted(set(handlers) - named)
        )
        if errors:
            raise RegistryError("tool definitions do not match the code:\n  " + "\n  ".join(errors))

    def select(
        self, *, tier: Tier, read_only: bool, toolsets: list[str] | None = None, disabled: list[str] | None = None
    ) -> list[Operation]:
        """The operations to register, by one documented filter order: toolsets, then writes, then tier."""
        unknown = sorted((set(toolsets or []) | set(disabled or [])) - set(self.toolsets))
        if unknown:
            raise RegistryError(f"unknown toolset(s) {', '.join(unknown)}; known: {', '.join(sorted(self.toolsets))}")
        chosen = []
        for op in self.operations.values():
            if toolsets is not None and op.toolset not in toolsets:
                continue
            if op.toolset in (disabled or []):
                continue
            if op.is_write and (read_only or not tier.allows(op.tier)):
                continue
            chosen.append(op)
        return sorted(chosen, key=lambda o: (o.toolset, o.name))


def handler_parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The caller-facing parameters of a handler (everything after the ToolContext)."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    return {p.name: p for p in params}


def handler_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    return typing.get_type_hints(inspect.unwrap(fn), include_extras=True)


def read_tools_file(path: Path | None = None) -> ToolsFile:
    if path is None:
        text = resources.files("pve_steward").joinpath("tools.yaml").read_text(encoding="utf-8")
        where = "packaged tools.yaml"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RegistryError(f"cannot read tools file {path}: {exc.strerror}") from exc
        where = str(path)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{where} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise RegistryError(f"{where} must be a mapping")
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise RegistryError(
            f"{where} has schema_version {raw.get('schema_version')!r}; this server reads "
            f"schema_version {SCHEMA_VERSION}"
        )
    if raw.get("definitions_version") != DEFINITIONS_VERSION:
        raise RegistryError(
            f"{where} has definitions_version {raw.get('definitions_version')!r}, but this server's "
            f"handlers are version {DEFINITIONS_VERSION}: regenerate it from the packaged file"
        )
    try:
        return ToolsFile.model_validate(raw)
    except ValidationError as exc:
        raise RegistryError(f"{where} is invalid: {exc}") from exc


def load_registry(path: Path | None = None) -> Registry:
    from pve_steward.security.guard import HANDLERS
    from pve_steward.tools import load_all

    load_all()
    return Registry(read_tools_file(path), dict(HANDLERS))
