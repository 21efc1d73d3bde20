"""The operation registry: the handlers' own declarations plus the words from ``tools.yaml``.

What an operation *is* (its name, toolset, whether it writes, its tier, its destructive and
idempotent hints, which handler runs it) is declared in code by ``@guarded(...)`` and read from
``handlers.HANDLERS``. ``tools.yaml`` (packaged; ``--tools-file`` may override it) supplies only
what it *says*: titles, summaries, descriptions and parameter descriptions. A file that sets
anything else is refused at start, naming the key and the operation (design record 261203-3).
Loading checks both agree on names and parameters, and that the file's schema and definitions
versions are exactly the ones this code expects. Everything else is derived: granular tools,
meta-tools, the read-only and toolset filters, docs and schema snapshots.

This module does not import the guard; the guard does not import it (``handlers.py`` sits between).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import inspect
import re
import typing
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pve_steward.security.handlers import HANDLERS, SEVERAL_CLUSTERS, spec_of
from pve_steward.security.narrowing import narrowed_out
from pve_steward.security.tiers import Tier

SCHEMA_VERSION = 1
DEFINITIONS_VERSION = "2026.12.1"
_NAME = re.compile(r"^[a-z][a-z0-9_]{2,47}$")
# The meta-tool holding the writes of each tier; its name is a binding, so it is code, not text.
WRITE_TOOL_NAMES = {Tier.OPERATOR: "operate", Tier.ADMIN: "administer"}
# What a tools file may set, per section; anything in CODE_KEYS is named as code-owned when tried.
TEXT_KEYS = {
    "operations": frozenset({"name", "title", "summary", "description", "parameters"}),
    "toolsets": frozenset({"title", "description"}),
    "write_tools": frozenset({"title", "description"}),
}
CODE_KEYS = frozenset(
    {"handler", "tier", "annotations", "toolset", "read_only", "destructive", "idempotent", "open_world", "name"}
)
_TOP_KEYS = frozenset({"schema_version", "definitions_version", "toolsets", "write_tools", "operations"})


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
    """One operation as registered: built by the Registry from the handler's declaration and the file's words."""

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


class OperationText(BaseModel):
    """One operation's words in the tools file: the only things a file may say about it."""

    model_config = ConfigDict(extra="forbid")
    name: str
    title: str
    summary: str = Field(max_length=90, description="one line for the action list of a meta-tool")
    description: str = Field(min_length=10)
    parameters: dict[str, str] = Field(default_factory=dict, description="parameter -> description")


class Toolset(BaseModel):
    """A domain: its operations become one read meta-tool and, if it has writes, one write meta-tool."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(max_length=40)
    description: str = Field(min_length=10, max_length=200)


class WriteToolText(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(max_length=60)
    description: str = Field(min_length=10, max_length=300)


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
    write_tools: dict[Tier, WriteToolText]
    operations: list[OperationText]


class Registry:
    """Operations as their handlers declare them, described by the tools file's words."""

    def __init__(self, spec: ToolsFile, handlers: dict[str, Callable[..., Any]]) -> None:
        self.spec = spec
        self.toolsets = dict(spec.toolsets)
        self.write_tools = {
            tier: WriteTool(name=WRITE_TOOL_NAMES[tier], title=text.title, description=text.description)
            for tier, text in spec.write_tools.items()
            if tier in WRITE_TOOL_NAMES
        }
        self.operations: dict[str, Operation] = {}
        self.handlers: dict[str, Callable[..., Any]] = {}
        errors: list[str] = []
        for text in spec.operations:
            if text.name in self.operations:
                errors.append(f"operation '{text.name}' is described twice")
                continue
            fn = handlers.get(text.name)
            if fn is None:
                errors.append(f"{text.name}: no handler of that name exists (the tools file cannot add operations)")
                continue
            op = self._bind(text, fn, errors)
            if op is not None:
                self.operations[op.name] = op
                self.handlers[op.name] = fn
        errors.extend(
            f"handler '{missing}' has no description in the tools file (add an operations entry named {missing})"
            for missing in sorted(set(handlers) - {o.name for o in spec.operations})
        )
        used = {op.toolset for op in self.operations.values()}
        errors.extend(
            f"toolset '{t}' has no title/description in the tools file" for t in sorted(used - set(self.toolsets))
        )
        errors.extend(
            f"the tools file describes toolset '{t}', which no handler uses" for t in sorted(set(self.toolsets) - used)
        )
        tiers = {op.tier for op in self.operations.values() if op.is_write}
        errors.extend(f"no write_tools entry for tier {t.value}" for t in sorted(tiers - set(self.write_tools)))
        if errors:
            raise RegistryError("tool definitions do not match the code:\n  " + "\n  ".join(errors))

    def _bind(self, text: OperationText, fn: Callable[..., Any], errors: list[str]) -> Operation | None:
        """The Operation for one handler: facts from its declaration, words from the file."""
        declared = spec_of(fn)
        if declared is None or not getattr(fn, "__guarded__", False):
            errors.append(f"{text.name}: handler '{text.name}' is not wrapped in @guarded")
            return None
        if declared.name != text.name:
            errors.append(f"{text.name}: bound to handler '{declared.name}'; an operation runs only its own handler")
            return None
        params = set(handler_parameters(fn))
        if params != set(text.parameters):
            errors.append(
                f"{text.name}: the tools file lists parameters {sorted(text.parameters)} but the handler "
                f"takes {sorted(params)}"
            )
        annotations = Annotations(
            read_only=not declared.is_write,
            destructive=declared.destructive,
            idempotent=declared.idempotent,
            open_world=declared.open_world,
        )
        try:
            return Operation(
                **text.model_dump(),
                toolset=declared.toolset,
                handler=declared.name,
                tier=declared.tier,
                annotations=annotations,
            )
        except ValidationError as exc:
            errors.append(f"{text.name}: {exc.errors()[0]['msg']}")
            return None

    def select(
        self,
        *,
        tier: Tier,
        read_only: bool,
        toolsets: list[str] | None = None,
        disabled: list[str] | None = None,
        allow: list[str] | None = None,
        deny: list[str] | None = None,
        several: bool = False,
    ) -> list[Operation]:
        """The operations to register, by one documented filter order: toolsets, then writes, then tier,
        then the action lists (``allow``: only operations matching one of these globs; ``deny``: none that
        matches one). The lists only narrow: an allowed write above the tier stays unregistered.
        ``several`` (several clusters configured) adds the operations in :data:`SEVERAL_CLUSTERS`."""
        unknown = sorted((set(toolsets or []) | set(disabled or [])) - set(self.toolsets))
        if unknown:
            raise RegistryError(f"unknown toolset(s) {', '.join(unknown)}; known: {', '.join(sorted(self.toolsets))}")
        self.check_action_globs(allow, "allow_actions")
        self.check_action_globs(deny, "deny_actions")
        chosen = []
        for op in self.operations.values():
            if toolsets is not None and op.toolset not in toolsets:
                continue
            if op.toolset in (disabled or []):
                continue
            if op.is_write and (read_only or not tier.allows(op.tier)):
                continue
            if narrowed_out(op.name, allow, deny) or (op.name in SEVERAL_CLUSTERS and not several):
                continue
            chosen.append(op)
        return sorted(chosen, key=lambda o: (o.toolset, o.name))

    def check_action_globs(self, globs: list[str] | None, setting: str) -> None:
        """A glob that matches no operation is a typo; in a deny list it would silently allow what it meant."""
        for glob in globs or []:
            if not any(fnmatch.fnmatchcase(name, glob) for name in self.operations):
                close = difflib.get_close_matches(glob, list(self.operations), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise RegistryError(
                    f"{setting}: '{glob}' matches no operation{hint}; give operation names or globs such as "
                    "'list_*' (see pve-steward docs or docs/tools.md)"
                )


def handler_parameters(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The caller-facing parameters of a handler (everything after the ToolContext)."""
    return dict(_parameters(fn))


def handler_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    return dict(_hints(fn))


# A handler's signature and hints are read once per process: each server build read them for every operation
# several times (registry, tools, meta-tools, node checks), 2.5 % of the test workers' CPU. Callers get copies.
@functools.cache
def _parameters(fn: Callable[..., Any]) -> tuple[tuple[str, inspect.Parameter], ...]:
    return tuple((p.name, p) for p in list(inspect.signature(fn).parameters.values())[1:])


@functools.cache
def _hints(fn: Callable[..., Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(typing.get_type_hints(inspect.unwrap(fn), include_extras=True).items())


def read_tools_file(path: Path | None = None) -> ToolsFile:
    """The tools file's words: the packaged file (``path`` None) is parsed once per process and shared by every
    registry built from it (never change it); a file of the user's is read each time, as it may be edited."""
    if path is None:
        return _packaged_tools_file()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"cannot read tools file {path}: {exc.strerror}") from exc
    return _parse_tools_file(text, str(path))


@functools.cache
def _packaged_tools_file() -> ToolsFile:
    # parsing it was 5 % of the CPU of test files that build a server per test (issue 43)
    text = resources.files("pve_steward").joinpath("tools.yaml").read_text(encoding="utf-8")
    return _parse_tools_file(text, "packaged tools.yaml")


def _parse_tools_file(text: str, where: str) -> ToolsFile:
    import yaml  # on first use: a start from a kept tool list reads no YAML (issue 17)

    try:
        # libyaml's loader when built in: the pure-Python one took 71 % of building the server (issue 17)
        raw = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise RegistryError(f"{where} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise RegistryError(f"{where} must be a mapping")
    if raw.get("schema_version") != SCHEMA_VERSION:
        raise RegistryError(
            f"{where} has schema_version {raw.get('schema_version')!r}; this server reads "
            f"schema_version {SCHEMA_VERSION}"
        )
    _only_text(raw, where)
    if raw.get("definitions_version") != DEFINITIONS_VERSION:
        raise RegistryError(
            f"{where} has definitions_version {raw.get('definitions_version')!r}, but this server's "
            f"handlers are version {DEFINITIONS_VERSION}: regenerate it from the packaged file"
        )
    try:
        return ToolsFile.model_validate(raw)
    except ValidationError as exc:
        raise RegistryError(f"{where} is invalid: {exc}") from exc


def _only_text(raw: dict[str, Any], where: str) -> None:
    """Refuse a file that tries to set what the code decides, naming the key and the entry."""
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise RegistryError(
            f"{where}: unknown top-level key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_TOP_KEYS))}"
        )
    entries: list[tuple[str, str, Any]] = []
    for section in ("toolsets", "write_tools"):
        value = raw.get(section)
        if isinstance(value, dict):
            entries += [(section, str(key), entry) for key, entry in value.items()]
    operations = raw.get("operations")
    if isinstance(operations, list):
        entries += [
            ("operations", str(entry.get("name", f"#{i + 1}")) if isinstance(entry, dict) else f"#{i + 1}", entry)
            for i, entry in enumerate(operations)
        ]
    for section, label, entry in entries:
        if not isinstance(entry, dict):
            raise RegistryError(f"{where}: {section} entry '{label}' must be a mapping")
        allowed = TEXT_KEYS[section]
        for key in entry:
            if key in allowed:
                continue
            what = "operation" if section == "operations" else section.rstrip("s").replace("_", " ")
            if key in CODE_KEYS:
                raise RegistryError(
                    f"{where}: {what} '{label}' sets '{key}', which the code decides (whether an operation "
                    "writes, its tier, toolset, annotations and handler are declared by the handler); a tools "
                    f"file may change only {', '.join(sorted(allowed))}"
                )
            raise RegistryError(
                f"{where}: {what} '{label}' has unknown key '{key}'; allowed: {', '.join(sorted(allowed))}"
            )


def load_registry(path: Path | None = None) -> Registry:
    from pve_steward.tools import load_all

    load_all()
    return Registry(read_tools_file(path), dict(HANDLERS))
