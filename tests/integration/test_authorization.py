"""Every limit a principal carries, on every MCP surface that reaches a cluster (issue 42, item 1).

Issue 42 found a static token with ``clusters = ["lab"]`` reading cluster ``prod``, getting prod's guest ids from
completion and resources, and running ``guest_reboot`` on prod; OIDC group rules took the same path. Here a
real server (two pvesim clusters, prod and lab; a local OIDC issuer; a principals file) is walked as a table:
each surface (granular tool, meta-tool, resource, resource template, completion, prompt, a view's read,
confirmation) x each principal kind (static token, OIDC user entry, OIDC group rule) x each limit (tier
ceiling, clusters, allow_actions, deny_actions). Where the limit applies the call is refused with a sentence
naming it, an audit record names the principal (``denied``), and neither cluster receives a request; where
it does not (a tier ceiling on a read) the call answers. tools/list, list_clusters and the completion of a
cluster name offer only what the principal may use; an elicitation-capable client's human is never asked.

Confirmation tokens are previewed first on a server whose principals file gives the same principals no
limits, then confirmed on the limited server (same confirmation key and used-token store): a limit set after
a preview holds for its confirmation.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, PromptReference

from pve_steward.surface.registry import load_registry
from pve_steward.views.apps import read_calls
from pvesim.server import SimServer
from tests.httpserver import free_port, serving
from tests.oidc import AUDIENCE, Issuer

pytestmark = pytest.mark.anyio
KINDS = ("static", "user", "group")
LIMITS = ("tier", "clusters", "allow", "deny")
DENIED = ["guest_reboot", "cluster_overview", "get_guest", "list_guests", "list_nodes"]
TARGET = {"tier": ("lab", 200), "clusters": ("prod", 100), "allow": ("lab", 200), "deny": ("lab", 200)}
WORDS = {
    "tier": "may use tier read_only",
    "clusters": "may not use cluster 'prod'",
    "allow": "allow_actions",
    "deny": "deny_actions",
}


@dataclass(frozen=True)
class Who:
    kind: str
    limit: str

    @property
    def name(self) -> str:  # what the principals file and the sentences call it
        return f"{self.kind[0]}-{self.limit}"

    def limits(self, limited: bool) -> str:
        if not limited:
            return 'tier = "operator"\n'
        return {
            "tier": 'tier = "read_only"\n',
            "clusters": 'tier = "operator"\nclusters = ["lab"]\n',
            "allow": 'tier = "operator"\nallow_actions = ["list_tasks", "get_task"]\n',
            "deny": f'tier = "operator"\ndeny_actions = {json.dumps(DENIED)}\n',
        }[self.limit]

    def static_token(self) -> str:
        return f"{self.name}-static-token-for-the-authorization-test"

    def entry(self, limited: bool) -> str:
        if self.kind == "static":
            sha = hashlib.sha256(self.static_token().encode()).hexdigest()
            return f'[[tokens]]\nname = "{self.name}"\nsha256 = "{sha}"\n' + self.limits(limited)
        if self.kind == "user":
            return f'[[users]]\nsubject = "{self.name}"\n' + self.limits(limited)
        return f'[[groups]]\ngroup = "{self.name}-group"\n' + self.limits(limited)

    def bearer(self, issuer: Issuer) -> str:
        if self.kind == "static":
            return self.static_token()
        return issuer.token(self.name, [f"{self.name}-group"] if self.kind == "group" else [])

    def principal_id(self, issuer: Issuer) -> str:
        return f"static:{self.name}" if self.kind == "static" else f"oidc:{issuer.url}#{self.name}"


EVERYONE = [Who(kind, limit) for kind in KINDS for limit in LIMITS]


def private(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(0o600)
    return path


def config(tmp_path: Path, sims: dict[str, SimServer], issuer: Issuer, *, limited: bool) -> Path:
    name = "limited" if limited else "open"
    principals = private(tmp_path / f"principals-{name}.toml", "".join(w.entry(limited) for w in EVERYONE))
    key = tmp_path / "confirm.key"
    if not key.exists():
        private(key, os.urandom(32))
    lines = [
        'tier = "operator"',
        f'confirm_key_file = "{key}"',
        f'token_store = "{tmp_path / "used-tokens.sqlite3"}"',
        f'principals_file = "{principals}"',
        f'oidc_issuer = "{issuer.url}"',
        f'oidc_audience = "{AUDIENCE}"',
    ]
    for cluster, sim in sims.items():
        token_id, secret = sim.token("operator@pve!mcp")
        secret_file = private(tmp_path / f"{cluster}.token", secret + "\n")
        lines += [
            f"[clusters.{cluster}]",
            f'url = "{sim.address}"',
            f'token_id = "{token_id}"',
            f'token_secret_file = "{secret_file}"',
            f'fingerprint = "{sim.fingerprint}"',
        ]
    return private(tmp_path / f"config-{name}.toml", "\n".join(lines) + "\n")


@contextmanager
def server(cfg: Path, audit: Path, *, granular: bool) -> Iterator[str]:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PVE_STEWARD_")},
        "PVE_STEWARD_CONFIG": str(cfg),
        "PVE_STEWARD_TRANSPORT": "http",
        "PVE_STEWARD_HTTP_PORT": str(port),
        "PVE_STEWARD_AUDIT_LOG": str(audit),
        "PVE_STEWARD_GRANULAR_TOOLS": "true" if granular else "false",
        "PVE_STEWARD_DIAGNOSTICS_PROCESS": "false",
        "PVE_STEWARD_READ_CACHE_TTL": "0",
    }
    with serving([sys.executable, "-m", "pve_steward", "serve"], port, env) as base:
        yield base


class Human:
    """An elicitation-capable client's human: records every question (a limited caller must be asked none)."""

    def __init__(self) -> None:
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.questions.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})


@asynccontextmanager
async def session(base: str, bearer: str, human: Human | None = None) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), elicitation_callback=human) as c,
    ):
        yield c


def error_text(result: Any) -> str | None:
    """The refusal of a call (tool error, JSON-RPC error), or None when it answered."""
    if isinstance(result, BaseException):
        return str(result)
    if getattr(result, "is_error", False):
        return str(result.content[0].text)
    return None


Call = Callable[[Client, Who], Any]


async def _tool(c: Client, who: Who) -> Any:
    cluster, vmid = TARGET[who.limit]
    return await c.call_tool("guest_reboot", {"cluster": cluster, "vmid": vmid})


async def _resource(c: Client, who: Who) -> Any:
    return await c.read_resource(f"pve-steward://cluster?cluster={TARGET[who.limit][0]}")


async def _template(c: Client, who: Who) -> Any:
    cluster, vmid = TARGET[who.limit]
    return await c.read_resource(f"pve-steward://guests/{vmid}?cluster={cluster}")


async def _completion(c: Client, who: Who) -> Any:
    ref = PromptReference(type="ref/prompt", name="guest_review")
    return await c.complete(ref, {"name": "vmid", "value": ""}, {"cluster": TARGET[who.limit][0]})


async def _prompt(c: Client, who: Who) -> Any:
    cluster, vmid = TARGET[who.limit]
    return await c.get_prompt("guest_review", {"cluster": cluster, "vmid": str(vmid)})


async def _meta_tool(c: Client, who: Who) -> Any:
    cluster, vmid = TARGET[who.limit]
    return await c.call_tool("operate", {"action": "guest_reboot", "cluster": cluster, "vmid": vmid})


def view_read_call() -> dict[str, Any]:
    """The call a view asks the host to make for its node figures, as the views build it (views/apps.py)."""
    registry = load_registry()
    calls = read_calls(list(registry.operations.values()), granular=False)
    return calls["nodes"]


VIEW_READ = view_read_call()


async def _view_read(c: Client, who: Who) -> Any:
    return await c.call_tool(VIEW_READ["tool"], {**VIEW_READ["arguments"], "cluster": TARGET[who.limit][0]})


# surface -> (call, operation audited, "via" of its audit record, whether a tier ceiling limits it)
GRANULAR: dict[str, tuple[Call, str, str | None, bool]] = {
    "tool": (_tool, "guest_reboot", None, True),
    "resource": (_resource, "cluster_overview", "resource", False),
    "template": (_template, "get_guest", "resource", False),
    "completion": (_completion, "list_guests", "completion", False),
    "prompt": (_prompt, "list_guests", "prompt", False),
}
META: dict[str, tuple[Call, str, str | None, bool]] = {
    "meta tool": (_meta_tool, "guest_reboot", "operate", True),
    "view read": (_view_read, "list_nodes", VIEW_READ["tool"], False),
}


@dataclass
class Walk:
    sims: dict[str, SimServer]
    issuer: Issuer
    audit: Path
    failures: list[str]

    def requests(self) -> dict[str, int]:
        return {name: sim.sim.requests for name, sim in self.sims.items()}

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    async def cell(self, c: Client, who: Who, surface: str, spec: tuple[Call, str, str | None, bool]) -> None:
        call, op, via, tier_limits = spec
        applies = who.limit != "tier" or tier_limits
        seen = len(self.records())
        before = self.requests()
        try:
            result: Any = await call(c, who)
        except MCPError as exc:
            result = exc
        refusal, after = error_text(result), self.requests()
        where = f"{surface} x {who.kind} x {who.limit}"
        if not applies:
            if refusal is not None:
                self.failures.append(f"{where}: refused a read the tier does not limit: {refusal}")
            return
        new = [r for r in self.records()[seen:] if r.get("outcome") == "denied"]
        expected = {"principal": who.principal_id(self.issuer), "tool": op, **({"via": via} if via else {})}
        if refusal is None or WORDS[who.limit] not in refusal or who.name not in refusal:
            self.failures.append(f"{where}: not refused as expected: {refusal!r}")
        if after != before:
            self.failures.append(f"{where}: PVE received {after} requests, was {before}")
        if not any(all(r.get(k) == v for k, v in expected.items()) for r in new):
            self.failures.append(f"{where}: no denied audit record {expected}; new records: {new}")

    async def offered(self, c: Client, who: Who) -> None:
        """What the principal is offered follows its grants: tools/list, and with a cluster limit the clusters
        list_clusters reports and completion offers (prod is not asked for its version)."""
        listed = {t.name for t in (await c.list_tools()).tools}
        wrong = {
            "tier": "guest_reboot" in listed,
            "clusters": "guest_reboot" not in listed,
            "allow": not listed or not listed <= {"list_tasks", "get_task"},
            "deny": bool(listed & set(DENIED)) or "list_storage" not in listed,
        }[who.limit]
        if wrong:
            self.failures.append(f"tools/list x {who.kind} x {who.limit}: {sorted(listed)}")
        if who.limit != "clusters":
            return
        before = self.requests()
        clusters = await c.call_tool("list_clusters", {})
        names = [row["name"] for row in (clusters.structured_content or {}).get("clusters", [])]
        ref = PromptReference(type="ref/prompt", name="guest_review")
        offered = (await c.complete(ref, {"name": "cluster", "value": ""})).completion.values
        if clusters.is_error:
            self.failures.append(f"list_clusters x {who.kind}: {clusters.content[0].text}")
        if names != ["lab"] or offered != ["lab"] or self.requests()["prod"] != before["prod"]:
            self.failures.append(f"clusters x {who.kind}: list_clusters {names}, completion {offered}")


async def test_every_surface_refuses_every_limit_of_every_kind_of_principal(
    start_sim: Callable[..., SimServer], tmp_path: Path
) -> None:
    sims = {"prod": start_sim("demo", speed=50), "lab": start_sim("healthy", speed=50)}
    issuer = Issuer()
    failures: list[str] = []
    with issuer.serving():
        tokens: dict[Who, str] = {}
        with server(
            config(tmp_path, sims, issuer, limited=False), tmp_path / "audit-open.jsonl", granular=True
        ) as base:
            for who in EVERYONE:  # previews while nobody is limited: the confirmation surface's tokens
                async with session(base, who.bearer(issuer)) as c:
                    preview = await _tool(c, who)
                assert error_text(preview) is None, (who, error_text(preview))
                tokens[who] = preview.structured_content["confirm_token"]
        limited = config(tmp_path, sims, issuer, limited=True)
        walk = Walk(sims, issuer, tmp_path / "audit-granular.jsonl", failures)
        human = Human()
        with server(limited, walk.audit, granular=True) as base:
            for who in EVERYONE:
                async with session(base, who.bearer(issuer), human) as c:
                    await walk.offered(c, who)
                    for surface, spec in GRANULAR.items():
                        await walk.cell(c, who, surface, spec)

                    async def confirm(c: Client, who: Who, token: str = tokens[who]) -> Any:
                        cluster, vmid = TARGET[who.limit]
                        return await c.call_tool(
                            "guest_reboot", {"cluster": cluster, "vmid": vmid, "confirm_token": token}
                        )

                    await walk.cell(c, who, "confirmation", (confirm, "guest_reboot", None, True))
        walk = Walk(sims, issuer, tmp_path / "audit-meta.jsonl", failures)
        with server(limited, walk.audit, granular=False) as base:
            for who in EVERYONE:
                async with session(base, who.bearer(issuer)) as c:
                    for surface, spec in META.items():
                        await walk.cell(c, who, surface, spec)
    reboots = [t for sim in sims.values() for t in list(sim.cluster.tasks) if t.type == "qmreboot"]
    assert not failures, "\n".join(failures)
    assert reboots == []  # no confirmation ran
    assert human.questions == []  # and nobody was asked to confirm what the caller may not do
