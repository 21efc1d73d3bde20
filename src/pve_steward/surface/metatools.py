"""Domain meta-tools: a few MCP tools, each taking an ``action`` plus that action's parameters.

Read operations are grouped by toolset into read tools (named after the toolset, truthfully
``readOnlyHint: true``); write operations are grouped by the tier they need into ``operate``
(operator) and ``administer`` (admin), so which write tools exist follows ``--tier`` and their
annotations describe their own risk. The input schema is the action enum plus the union of the actions'
parameters, all optional at the schema level; each call is validated against the chosen action's
own parameters (the handler's typed signature), with an error that names the action's parameters.
The result is an envelope ``{action, result}`` whose ``result`` is the handler's model, unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, WithJsonSchema, create_model

from pve_steward.models import Model
from pve_steward.pve.ids import integer_input
from pve_steward.surface.answers import answer
from pve_steward.surface.registry import Operation, Registry, handler_hints, handler_parameters

# Parameters every write action shares; described once in the tool description, not per action.
WRITE_COMMON = ("confirm_token", "wait", "wait_timeout")
# The optional parameters of a paged diagnosis; where several actions take all three, the description
# says so once and marks them (+), as it marks task actions (*) (bench_catalog's token budget).
PAGING = ("detail", "limit", "offset")


class ActionResult(Model):
    """What every meta-tool returns: the action that ran and its result (that operation's own model).

    The advertised output schema says only "an object": an envelope of ``action`` (a string) and
    ``result`` (an object) told a client nothing more, at 85 bytes a tool on every turn. Each action's
    result schema is documented in docs/tools.md and advertised in full by ``--granular-tools``.
    """

    model_config = ConfigDict(json_schema_extra=lambda schema, _cls: _bare_envelope(schema))
    action: str
    result: dict[str, Any]


def _bare_envelope(schema: dict[str, Any]) -> None:
    schema.clear()
    schema["type"] = "object"


@dataclass
class Action:
    op: Operation
    handler: Callable[..., Any]
    model: type[BaseModel]  # validates this action's parameters
    required: list[str]
    optional: list[str]
    types: dict[str, Any]  # parameter -> its type as the handler declares it (with constraints)

    @property
    def paged(self) -> bool:
        return all(p in self.optional for p in PAGING)

    def signature_line(self, paging_said: bool = False) -> str:
        """``name*+(required, optional?): summary``; the shared parameters said once are left out."""
        left_out = WRITE_COMMON + (PAGING if paging_said and self.paged else ())
        params = list(self.required) + [f"{p}?" for p in self.optional if p not in left_out]
        marks = ("*" if "wait" in self.types else "") + ("+" if paging_said and self.paged else "")
        return f"{self.op.name}{marks}({', '.join(params)}): {self.op.summary}"


@dataclass
class MetaTool:
    name: str
    toolset: str
    write: bool
    title: str
    toolset_description: str
    actions: dict[str, Action] = field(default_factory=dict)

    @property
    def annotations(self) -> ToolAnnotations:
        ops = [a.op.annotations for a in self.actions.values()]
        return ToolAnnotations(
            read_only_hint=all(a.read_only for a in ops),
            destructive_hint=any(a.destructive for a in ops),
            idempotent_hint=all(a.idempotent for a in ops),
            open_world_hint=any(a.open_world for a in ops),
        )

    @property
    def description(self) -> str:
        actions = sorted(self.actions.values(), key=lambda a: a.op.name)
        paging_said = sum(a.paged for a in actions) > 1
        head = f"{self.toolset_description}."
        if self.write:
            head += (
                " Two-phase: without confirm_token an action only previews and returns a token; after the user"
                " agrees, call again with the same parameters + confirm_token. * = runs a PVE task; also wait?,"
                " wait_timeout?."
            )
        if paging_said:
            head += f" + = paged: also {', '.join(f'{p}?' for p in PAGING)}."
        return "\n".join([f"{head} Actions:", *(a.signature_line(paging_said) for a in actions)])


def _action(op: Operation, handler: Callable[..., Any]) -> Action:
    hints = handler_hints(handler)
    fields: dict[str, Any] = {}
    types: dict[str, Any] = {}
    required: list[str] = []
    optional: list[str] = []
    for p in handler_parameters(handler).values():
        types[p.name] = hints[p.name]
        annotation = _described(integer_input(hints[p.name], p.name), op.parameters.get(p.name))
        if p.default is inspect.Parameter.empty:
            fields[p.name] = (annotation, ...)
            required.append(p.name)
        else:
            fields[p.name] = (annotation, p.default)
            optional.append(p.name)
    model = create_model(f"{op.name}_parameters", __config__=ConfigDict(extra="forbid", defer_build=True), **fields)
    return Action(op=op, handler=handler, model=model, required=required, optional=optional, types=types)


def _described(tp: Any, description: str | None) -> Any:
    return Annotated[tp, Field(description=description)]


def _group(registry: Registry, op: Operation) -> tuple[str, str, str, str]:
    """(tool name, title, description, group) of the meta-tool ``op`` joins."""
    if op.is_write:
        spec = registry.write_tools[op.tier]
        return spec.name, spec.title, spec.description, op.tier.value
    toolset = registry.toolsets[op.toolset]
    return op.toolset, toolset.title, toolset.description, op.toolset


def build_meta_tools(registry: Registry, ops: list[Operation]) -> list[MetaTool]:
    """Group the selected operations: one read tool per toolset, one write tool per tier."""
    tools: dict[str, MetaTool] = {}
    for op in ops:
        name, title, description, group = _group(registry, op)
        meta = tools.get(name)
        if meta is None:
            meta = tools[name] = MetaTool(name, group, op.is_write, title, description)
        meta.actions[op.name] = _action(op, registry.handlers[op.name])
    return [tools[name] for name in sorted(tools)]


# (operation, handler, its tool's words) of each operation -> the meta-tools built from them; bounded by
# the configurations a process builds, as outputschema's kept tools are
_KEPT: dict[Hashable, list[MetaTool]] = {}


def kept_meta_tools(registry: Registry, ops: list[Operation]) -> tuple[Hashable, list[MetaTool]]:
    """:func:`build_meta_tools`, once per process for the same operations, handlers and words, with the key
    that decides them: each action's parameters model took most of building a default server. The meta-tools
    are shared, never changed after they are built."""
    key = tuple((op.model_dump_json(), registry.handlers[op.name], _group(registry, op)) for op in ops)
    tools = _KEPT.get(key)
    if tools is None:
        tools = _KEPT[key] = build_meta_tools(registry, ops)
    return key, tools


def _param_schema(meta: MetaTool, name: str) -> dict[str, Any]:
    """One JSON schema for a parameter shared by several actions (anyOf when their types differ).

    Every meta-tool parameter is optional at the schema level, so ``null`` branches are dropped;
    what a parameter means is in the action lines of the description and in docs/tools.md.
    """
    schemas: list[dict[str, Any]] = []
    for action in meta.actions.values():
        if name not in action.types:
            continue
        schema = _non_null(TypeAdapter(action.types[name]).json_schema())
        if schema not in schemas:
            schemas.append(schema)
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


# Syntax and bounds are checked per action, with an error naming the parameter and the action's
# parameters; the advertised schema keeps types and enums only, so the catalog stays small.
_DROPPED = (
    "title",
    "default",
    "description",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "maxItems",
    "minItems",
)


def _non_null(schema: dict[str, Any]) -> dict[str, Any]:
    schema = {k: v for k, v in schema.items() if k not in _DROPPED}
    if isinstance(schema.get("items"), dict):
        schema["items"] = _non_null(schema["items"])
    branches = schema.get("anyOf")
    if branches:
        kept = [_non_null(b) for b in branches if b.get("type") != "null"]
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        return {**rest, **kept[0]} if len(kept) == 1 else {**rest, "anyOf": kept}
    return schema


def describe_errors(exc: ValidationError) -> str:
    """Pydantic's errors as one sentence per parameter: which one, what is wrong, what is allowed.

    No error codes, input echoes or documentation links: the model reads this and fixes the call.
    """
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(x) for x in err["loc"]) or "(parameters)"
        if err["type"] == "missing":
            problems.append(f"parameter '{where}' is required")
            continue
        cause = (err.get("ctx") or {}).get("error")
        message = str(cause) if isinstance(cause, ValueError) else err["msg"]
        problems.append(f"parameter '{where}': {message}")
    return "; ".join(problems) + "."


def invalid(action: Action, exc: ValidationError) -> str:
    return f"action '{action.op.name}': {describe_errors(exc)} {parameters_of(action)}"


def _parameters_text(name: str, required: list[str], optional: list[str]) -> str:
    req = ", ".join(required) or "none"
    opt = ", ".join(optional) or "none"
    return f"Parameters of {name}: required {req}; optional {opt}."


def parameters_of(action: Action) -> str:
    return _parameters_text(action.op.name, action.required, action.optional)


def parameters_line(name: str, handler: Callable[..., Any]) -> str:
    """``Parameters of <op>: required ...; optional ...`` for a granular tool's error messages."""
    params = handler_parameters(handler).values()
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    return _parameters_text(name, required, [p.name for p in params if p.name not in required])


def validate_action(meta: MetaTool, action_name: str, given: dict[str, Any]) -> tuple[Action, dict[str, Any]]:
    """The chosen action and its validated arguments; a ToolError names what is wrong and what is allowed."""
    action = meta.actions.get(action_name)
    if action is None:
        raise ToolError(f"unknown action '{action_name}' for {meta.name}; actions: {', '.join(meta.actions)}")
    provided = {k: v for k, v in given.items() if v is not None}
    extra = sorted(set(provided) - set(action.model.model_fields))
    if extra:
        raise ToolError(
            f"action '{action_name}' does not take {', '.join(repr(e) for e in extra)}. {parameters_of(action)}"
        )
    try:
        validated = action.model.model_validate(provided)
    except ValidationError as exc:
        raise ToolError(invalid(action, exc)) from None
    return action, {name: getattr(validated, name) for name in action.model.model_fields}


def make_meta_function(
    meta: MetaTool,
    run: Callable[..., Any],
    human_annotation: Any,
    context_annotation: Any,
    cluster: inspect.Parameter | None = None,
) -> Callable[..., Any]:
    """An MCP tool function: ``action`` + the union of parameters; ``run`` executes the validated action.

    ``cluster`` (several clusters) is the tool's ``cluster`` parameter; its value goes to ``run``.
    """
    names: list[str] = []
    for action in meta.actions.values():
        names += [n for n in action.model.model_fields if n not in names]
    action_enum = Literal[tuple(meta.actions)]  # type: ignore[valid-type]
    params = [
        inspect.Parameter(
            "action",
            inspect.Parameter.KEYWORD_ONLY,
            # Always an enum (pydantic would write a one-action tool as "const"); clients look for the list.
            annotation=Annotated[action_enum, WithJsonSchema({"enum": list(meta.actions), "type": "string"})],
        )
    ]
    if cluster is not None:
        params.append(cluster)
    for name in names:
        schema = _param_schema(meta, name)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Annotated[Any, WithJsonSchema(schema)],
            )
        )
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=context_annotation))
    if meta.write:
        params.append(inspect.Parameter("human", inspect.Parameter.KEYWORD_ONLY, annotation=human_annotation))

    async def tool(**kwargs: Any) -> ActionResult:
        ctx = kwargs.pop("ctx")
        human = kwargs.pop("human", None)
        chosen = kwargs.pop("cluster", None)
        action, args = validate_action(meta, kwargs.pop("action"), kwargs)
        result = await (run(action, args, ctx, human) if cluster is None else run(action, args, ctx, human, chosen))
        if isinstance(result, BaseModel):
            return answer(result, action.op.name)  # type: ignore[return-value]  # the SDK takes an answer as is
        return ActionResult(action=action.op.name, result=result)

    tool.__name__ = meta.name
    tool.__doc__ = meta.description
    tool.__signature__ = inspect.Signature(params, return_annotation=ActionResult)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": ActionResult}
    return tool
