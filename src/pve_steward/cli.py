"""The pve-steward command: serve MCP (stdio or HTTP), run the demo, check a cluster, list tools.

Every option of the settings is a flag (generated from the settings fields), and each subcommand
lists only the flags it uses, with their environment variable and default.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import types
import typing
from pathlib import Path
from typing import Any, NoReturn

from pydantic import SecretStr, ValidationError

from pve_steward import __version__
from pve_steward.config import ENV_PREFIX, ConfigError, Settings, default_state_dir, describe_errors, load_settings
from pve_steward.security.files import make_private_dir
from pve_steward.serving.exitcodes import EXIT_UNKNOWN, EXIT_USAGE

DESCRIPTION = """\
pve-steward: an MCP server that lets an AI assistant operate Proxmox VE carefully.

Run without a command, it serves MCP like "pve-steward serve". Start with
"pve-steward demo" (a simulated cluster, nothing to configure), then
"pve-steward serve --help" for connecting to a real cluster.

Every setting is a flag, an environment variable PVE_STEWARD_<NAME> or a key in
the TOML file given with --config; a flag beats the environment, which beats the file."""

# Which settings each command shows. A setting added to config.py and not named here is shown
# by `serve` and `demo` (the commands that run the server) under "other settings".
SECTIONS: dict[str, tuple[str, ...]] = {
    "connection to Proxmox VE": (
        "url",
        "token_id",
        "token_secret",
        "token_secret_file",
        "verify_tls",
        "ca_file",
        "fingerprint",
        "insecure",
    ),
    "connection to Proxmox Backup Server": (
        "pbs_url",
        "pbs_token_id",
        "pbs_token_secret",
        "pbs_token_secret_file",
        "pbs_ca_file",
        "pbs_fingerprint",
    ),
    "API requests": (
        "timeout",
        "connect_timeout",
        "concurrency",
        "retries",
        "request_budget",
        "request_budget_burst",
        "request_budget_store",
        "disable_version_check",
    ),
    # what only a running server uses: `check` runs once and exits
    "serving": (
        "read_cache_ttl",
        "heavy_calls",
        "busy_wait",
        "diagnostics_process",
        "diagnostics_priority",
        "otel_endpoint",
        "otel_service_name",
    ),
    "MCP transport": ("transport", "http_host", "http_port", "http_bearer_token", "allowed_hosts", "max_request_bytes"),
    "who is calling (HTTP)": (
        "public_url",
        "oidc_issuer",
        "oidc_audience",
        "oidc_jwks_url",
        "oidc_principal_claim",
        "oidc_groups_claim",
        "oidc_jwks_refresh",
        "principals_file",
    ),
    "tools registered": (
        "tier",
        "read_only",
        "granular_tools",
        "toolsets",
        "disable_toolsets",
        "tools_file",
        "allow_actions",
        "deny_actions",
    ),
    "safety": (
        "audit_log",
        "audit_reads",
        "confirm_ttl",
        "confirm_key_file",
        "token_store",
        "token_store_timeout",
        "replicas",
        "audit_syslog",
        "audit_syslog_ca_file",
        "audit_required",
    ),
    "diagnostics": ("thresholds", "suppress"),
}
OTHER = "other settings"
# What `check` reads: the connections (PBS too: the pbs area), the request settings and the diagnostics' own.
CHECK_SECTIONS = ("connection to Proxmox VE", "connection to Proxmox Backup Server", "API requests", "diagnostics")
# Settings only a config file can give (tables); they get no flag.
FILE_ONLY = ("clusters",)
# The demo connects to its own simulated cluster: these flags would be silently wrong there.
DEMO_REFUSES = (
    *SECTIONS["connection to Proxmox VE"],
    *SECTIONS["connection to Proxmox Backup Server"],
    "transport",
    "disable_version_check",
)
DEMO_PBS_TOKEN = "steward@pbs!monitor"  # the simulated PBS's token with Datastore.Audit (pvesim/pbs/scenarios)
# Which pvesim token the demo uses per tier: root@pam's token for the admin tier, the operator token with
# exactly the operator tier's privileges, and the read-only one is the README's: PVEAuditor plus what PVE
# asks before it lists backups.
DEMO_TOKENS = {"read_only": "monitor@pve!mcp", "operator": "operator@pve!mcp", "admin": "root@pam!pvesim"}
DEMO_SECOND = "healthy"  # the small second cluster of `demo --clusters 2`


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on exit code 64, apart from check's 0..3 (design record 261203-8)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _flag_type(annotation: Any) -> tuple[Any, bool, list[str] | None]:
    """(argparse type, is_bool, choices) for a settings field annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if typing.get_origin(annotation) in (typing.Union, types.UnionType) and args else annotation
    if base is bool:
        return None, True, None
    if typing.get_origin(base) is typing.Literal:
        return str, False, [str(a) for a in typing.get_args(base)]
    if isinstance(base, type) and issubclass(base, str) and hasattr(base, "__members__"):
        return str, False, [str(m.value) for m in base.__members__.values()]
    if base in (int, float):
        return base, False, None
    if base is Path:
        return Path, False, None
    return str, False, None


def _shown_default(name: str) -> str:
    value = Settings.model_fields[name].get_default(call_default_factory=True)
    if value is None or value in ([], {}):
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(getattr(value, "value", value))


def _add_setting(group: Any, name: str, suppress: bool, hidden: bool = False) -> None:
    field = Settings.model_fields[name]
    flag = "--" + name.replace("_", "-")
    conv, is_bool, choices = _flag_type(field.annotation)
    default = argparse.SUPPRESS if suppress else None
    shown = _shown_default(name)
    help_text = f"{field.description} (env {ENV_PREFIX}{name.upper()}" + (f"; default: {shown})" if shown else ")")
    if hidden:
        help_text = argparse.SUPPRESS
    if is_bool:
        group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=default, help=help_text)
    else:
        metavar = None if choices else name.upper()
        group.add_argument(
            flag, dest=name, type=conv, choices=choices, default=default, help=help_text, metavar=metavar
        )


def add_settings_flags(
    parser: argparse.ArgumentParser,
    sections: typing.Collection[str] | None = None,
    suppress: bool = False,
    hidden: typing.Collection[str] = (),
) -> None:
    """Flags for the settings in ``sections`` (None: all), grouped; ``hidden`` ones parse but do not show."""
    config = parser.add_argument_group("configuration file")
    config.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS if suppress else None,
        help=f"TOML file with any of the settings below, and [clusters.NAME] tables for several clusters "
        f"(env {ENV_PREFIX}CONFIG)"
        if sections != ()
        else argparse.SUPPRESS,
    )
    listed = {n for names in SECTIONS.values() for n in names} | set(FILE_ONLY)
    others = tuple(n for n in Settings.model_fields if n not in listed)
    for title, names in [*SECTIONS.items(), (OTHER, others)]:
        chosen = [n for n in names if n in Settings.model_fields and n not in hidden]
        wanted = sections is None or title in sections
        if wanted and chosen:
            group = parser.add_argument_group(title)
            for name in chosen:
                _add_setting(group, name, suppress)
    for name in hidden:
        if name not in FILE_ONLY:
            _add_setting(parser, name, suppress, hidden=True)


def settings_from(args: argparse.Namespace, reset: typing.Collection[str] = (), **extra: Any) -> Settings:
    overrides = {name: getattr(args, name, None) for name in Settings.model_fields if name not in FILE_ONLY}
    overrides.update(extra)
    secret = overrides.get("token_secret")
    if isinstance(secret, str):
        overrides["token_secret"] = SecretStr(secret)
    return load_settings(getattr(args, "config", None), reset=reset, **overrides)


def describe(exc: ValidationError) -> str:
    return describe_errors(exc)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"pve-steward: {message}", file=sys.stderr)
    return code


def _server_lines(settings: Settings) -> list[str]:
    from pve_steward.serving.listen import mode

    return [
        f"tier: {settings.tier.value}" + (" (read-only: no write tools)" if settings.read_only else ""),
        f"mode: {mode(settings)}",
        f"audit log: {settings.audit_log}",
    ]


def _clusters_line(settings: Settings) -> str:
    from pve_steward.pveio.clusters import cluster_targets

    targets = cluster_targets(settings)
    named = [f"{t.name} ({t.settings.url} as {t.settings.token_id}, up to {t.tier.value})" for t in targets]
    if named:
        return "clusters: " + ", ".join(named) + "; PVE versions: checked on first use (list_clusters)"
    return f"cluster: Proxmox VE at {settings.url} as {settings.token_id}; PVE version: checked on first use"


def cmd_serve(args: argparse.Namespace) -> int:
    from pve_steward.pveio.client import ProxmoxerClient
    from pve_steward.pveio.clusters import cluster_targets
    from pve_steward.pveio.pbslink import pbs_link
    from pve_steward.server import build_server
    from pve_steward.serving import logsetup

    logsetup.configure()  # before anything is opened: start-up alarms must reach the operator
    settings = settings_from(args)
    if settings.transport == "http":
        from pve_steward.serving.http import check_bind

        check_bind(settings)  # an unsafe bind is a configuration error
    make_private_dir(settings.audit_log.parent)  # the state dir: audit log and used tokens, 0700
    if settings.otel_endpoint:
        from pve_steward.observe.telemetry import setup_tracing

        setup_tracing(settings.otel_endpoint, settings.otel_service_name)
    # The clients check the settings; they touch nothing on the network.
    clients = {t.name: ProxmoxerClient(t.client_settings) for t in cluster_targets(settings)}
    client = None if clients else ProxmoxerClient(settings)
    pbs_link(settings)  # the PBS connection's settings too: refused at start, not on first use
    # No cluster I/O before serving: the tools check the version on first use and report it (issue 17).
    # The tool list is kept beside the audit log: a later start answers tools/list from it (surface.py).
    mcp = build_server(settings, client=client, clients=clients, surface_dir=settings.audit_log.parent)
    from pve_steward.serving.listen import endpoint, say, serve_http, settle_heap

    settle_heap()
    if settings.transport == "stdio":
        mcp.run()
        return 0

    def banner(port: int) -> None:
        lines = [f"pve-steward {__version__}: MCP endpoint {endpoint(settings, port)}"]
        say([*lines, _clusters_line(settings), *_server_lines(settings), "Press Ctrl-C to stop."])

    serve_http(mcp, settings, banner)
    return 0


def _refused_demo_flags(args: argparse.Namespace) -> list[str]:
    return ["--" + n.replace("_", "-") for n in DEMO_REFUSES if getattr(args, n, None) is not None]


def _ignored_demo_env() -> list[str]:
    from pve_steward.config import env_names

    env = env_names()
    return [env[n] for n in DEMO_REFUSES if n in env]


def cmd_demo(args: argparse.Namespace) -> int:
    """Start pvesim with a scenario and serve MCP against it over HTTPS, like any cluster."""
    refused = _refused_demo_flags(args)
    if refused:
        return _fail(
            f"demo: {', '.join(refused)} {'is' if len(refused) == 1 else 'are'} not used by the demo, which serves "
            "its own simulated cluster; "
            "for a real cluster run: pve-steward serve --url HOST --token-id ID --token-secret-file FILE"
        )
    import pvesim  # the only place the server side touches the simulator
    from pve_steward.server import build_server
    from pve_steward.serving import logsetup
    from pvesim.cli import token_roles
    from pvesim.pbs import attach, start_pbs
    from pvesim.server import stop_on_sigterm

    logsetup.configure()  # before anything is opened: start-up alarms must reach the operator
    stop_on_sigterm()  # SIGTERM removes the simulators' temporary keys before it ends the demo

    out = sys.stderr if args.stdio else sys.stdout
    ignored = _ignored_demo_env()
    if ignored:
        print(f"demo: ignoring {', '.join(ignored)} from the environment (the demo uses its own cluster)", file=out)
    state = make_private_dir(Path(args.state_dir))
    extra: dict[str, Any] = {"transport": "stdio" if args.stdio else "http"}
    if getattr(args, "audit_log", None) is None:
        extra["audit_log"] = state / "demo-audit.jsonl"
    if getattr(args, "token_store", None) is None:
        extra["token_store"] = str(state / "demo-used-tokens.sqlite3")
    if getattr(args, "tier", None) is None and not getattr(args, "read_only", None):
        extra["tier"] = "operator"
    preview = settings_from(args, reset=DEMO_REFUSES, **extra)  # validates the flags before pvesim starts
    if preview.clusters:  # a file's tables would be merged into the demo's own clusters
        return _fail(
            "demo: the [clusters.*] tables of the config file are not used by the demo, which serves its own "
            "simulated clusters (demo --clusters 2); leave out --config or use a file without them"
        )
    if args.clusters > 1:
        return _demo_clusters(args, extra, preview.tier.value, out)
    sim = pvesim.start_scenario(args.scenario, speed=args.speed)
    pbs = start_pbs("demo")  # the Proxmox Backup Server behind the demo's storage pbs-main
    attach(sim.cluster, pbs)
    try:
        token = DEMO_TOKENS[preview.tier.value]
        if token not in sim.cluster.tokens:
            return _fail(f"demo: scenario '{args.scenario}' has no token {token} for tier {preview.tier.value}")
        token_id, secret = sim.token(token)
        connection = {"url": sim.address, "token_id": token_id, "token_secret": secret, "fingerprint": sim.fingerprint}
        pbs_id, pbs_secret = pbs.token(DEMO_PBS_TOKEN)
        connection |= {
            "pbs_url": pbs.address,
            "pbs_token_id": pbs_id,
            "pbs_token_secret": pbs_secret,
            "pbs_fingerprint": pbs.fingerprint,
        }
        settings = settings_from(args, reset=DEMO_REFUSES, **extra, **connection)
        mcp = build_server(settings)
        lines = [
            f"pvesim: simulated cluster '{args.scenario}' at {sim.url} (fingerprint {sim.fingerprint[:23]}...)",
            f"token: {token_id} ({token_roles(sim.cluster.tokens[token])})",
            f"PBS simulator at {pbs.url} (token {pbs_id})",
            *_server_lines(settings),
        ]
        return _run_demo(mcp, settings, lines, out)
    except KeyboardInterrupt:
        return 0
    finally:
        pbs.stop()
        sim.stop()


def _demo_clusters(args: argparse.Namespace, extra: dict[str, Any], tier: str, out: Any) -> int:
    """Two simulated clusters (the demo scenario and a small healthy one), one server for both."""
    import pvesim
    from pve_steward.server import build_server

    token = DEMO_TOKENS[tier]
    with contextlib.ExitStack() as stack:
        clusters: dict[str, Any] = {}
        lines = []
        for name in (args.scenario, DEMO_SECOND):
            sim = stack.enter_context(pvesim.start_scenario(name, speed=args.speed))
            if token not in sim.cluster.tokens:
                return _fail(f"demo: scenario '{name}' has no token {token} for tier {tier}")
            token_id, secret = sim.token(token)
            label = "c-" + re.sub(r"[^a-z0-9_-]+", "-", Path(name).stem.lower())[:30]
            label = label[2:] if label[2:3].isalpha() else label
            clusters[label] = {"url": sim.address, "token_id": token_id, "token_secret": secret}
            clusters[label]["fingerprint"] = sim.fingerprint
            lines.append(f"pvesim: simulated cluster '{label}' at {sim.url} (token {token_id})")
        if len(clusters) < 2:
            return _fail(f"demo: --clusters 2 needs a scenario other than '{DEMO_SECOND}' (the second cluster)")
        settings = settings_from(args, reset=DEMO_REFUSES, **extra, clusters=clusters)
        lines += ["every tool takes cluster=" + " or ".join(clusters), *_server_lines(settings)]
        try:
            return _run_demo(build_server(settings), settings, lines, out)
        except KeyboardInterrupt:
            return 0
    return 0


def _run_demo(mcp: Any, settings: Settings, lines: list[str], out: Any) -> int:
    from pve_steward.serving.listen import endpoint, say, serve_http, settle_heap

    settle_heap()
    if settings.transport == "stdio":
        say(lines, out)
        mcp.run()
        return 0

    def banner(port: int) -> None:
        url = endpoint(settings, port)
        say(
            [
                *lines,
                f"MCP endpoint: {url}",
                f"Try it:  npx @modelcontextprotocol/inspector --cli {url} --transport http --method tools/list",
                "Press Ctrl-C to stop.",
            ],
            out,
        )

    serve_http(mcp, settings, banner)
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    from mcp import Client

    from pve_steward.server import build_server
    from pve_steward.testing import FakeClient

    async def listing() -> list[Any]:
        async with Client(mcp) as c:
            return list((await c.list_tools()).tools)

    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_from(args, audit_log=Path(tmp) / "audit.jsonl", token_store="memory")
        mcp = build_server(settings, client=FakeClient(), check_version_on_start=False)
        tools = asyncio.run(listing())
    if args.json:
        print(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], indent=2))
        return 0
    for tool in tools:
        a = tool.annotations
        flags = [
            name
            for name, on in (
                ("read-only", a and a.read_only_hint),
                ("destructive", a and a.destructive_hint),
                ("idempotent", a and a.idempotent_hint),
            )
            if on
        ]
        print(f"{tool.name:28} {', '.join(flags)}")
    print(f"{len(tools)} tool{'' if len(tools) == 1 else 's'}", file=sys.stderr)
    return 0


def _one_cluster(settings: Settings, name: str | None) -> Settings:
    """The settings of the cluster ``check --cluster`` names (the first [clusters.NAME] table by default)."""
    from pve_steward.pveio.clusters import cluster_targets

    targets = cluster_targets(settings)
    if not targets:
        if name is not None:
            raise ValueError("--cluster names one of the [clusters.NAME] tables of the config file; there are none")
        return settings
    chosen = next((t for t in targets if t.name == name), None) if name is not None else targets[0]
    if chosen is None:
        raise ValueError(f"no cluster '{name}'; clusters are: {', '.join(t.name for t in targets)}")
    return chosen.client_settings


def html_target_problem(path: Path | None) -> str | None:
    """Why ``check --html FILE`` cannot write FILE, as one sentence with the fix; None when it can."""
    if path is None:
        return None
    fix = "give --html a file in a directory you can write to"
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"cannot write the HTML report to {path}: it is a directory; {fix}, e.g. {path / 'report.html'}"
    if not parent.is_dir():
        return f"cannot write the HTML report to {path}: the directory {parent} does not exist; {fix}"
    if path.exists() and not os.access(path, os.W_OK):
        return f"cannot write the HTML report to {path}: the file is not writable for this user; {fix}"
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot write the HTML report to {path}: the directory {parent} is not writable for this user; {fix}"
    return None


def _emit(args: argparse.Namespace, *emitted: Any) -> int:
    """views.report.emit (text, markdown and the --html file), its file failure said in one sentence."""
    from pve_steward.serving.checkcmd import print_error
    from pve_steward.views.report import emit

    try:
        return emit(args, *emitted)
    except OSError as exc:  # the directory went away or filled up while the check ran
        message = f"cannot write the HTML report to {args.html}: {exc.strerror or exc}; give --html a writable file"
        return print_error("output", message, EXIT_UNKNOWN, args.json)


def cmd_check(args: argparse.Namespace) -> int:
    """Run the diagnostics once and print them; exit code by worst severity (see checkcmd)."""
    from pve_steward.analysis.health import AREAS
    from pve_steward.analysis.suppression import check_known
    from pve_steward.errors import PveError
    from pve_steward.pveio.client import ProxmoxerClient, api_path
    from pve_steward.pveio.compat import ConnectionProblem, check_cluster
    from pve_steward.pveio.pbslink import pbs_link
    from pve_steward.serving.checkcmd import Header, cluster_name, print_error, print_report
    from pve_steward.tools.runs import run_check

    areas = [a.strip() for a in args.areas.split(",")] if args.areas else list(AREAS)
    unknown = sorted(set(areas) - set(AREAS))
    if unknown:
        message = f"unknown area(s) {', '.join(unknown)}; choose from {', '.join(AREAS)}"
        return print_error("usage", message, EXIT_USAGE, args.json)
    if args.upgrade is not None and args.areas:
        message = "--upgrade runs the upgrade checks only; leave out --areas (or run check without --upgrade)"
        return print_error("usage", message, EXIT_USAGE, args.json)
    unwritable = html_target_problem(args.html)  # before the check runs, not after a minute of reads
    if unwritable:
        return print_error("usage", unwritable, EXIT_USAGE, args.json)
    try:
        settings = _one_cluster(settings_from(args), args.cluster)
        client = ProxmoxerClient(settings)
        pbs = pbs_link(settings)
        check_known(settings.suppress)
    except ValueError as exc:  # ConfigError, a missing url/token, a bad secret file or suppression, an unknown cluster
        return print_error("configuration", str(exc), EXIT_USAGE, args.json)
    if args.upgrade is not None:
        return _check_upgrade(args, settings, client)
    now = time.time()

    async def run() -> tuple[Any, Header]:
        version = await check_cluster(settings, client)
        try:
            name = cluster_name(await client.get(api_path("cluster", "status")))
        except PveError:
            name = "unknown (/cluster/status could not be read)"
        report = await run_check(client, settings, now, areas, None, pbs=pbs)
        return report, Header(name, version, str(settings.token_id), now)

    try:
        report, header = asyncio.run(run())
    except ConnectionProblem as exc:
        return print_error("connection", str(exc), EXIT_UNKNOWN, args.json)
    except PveError as exc:
        return print_error("cluster", str(exc), EXIT_UNKNOWN, args.json)
    if args.html or args.format == "markdown":
        return _emit(args, report, settings, client, header)
    return print_report(report, args.json, args.color, header)


def _check_upgrade(args: argparse.Namespace, settings: Settings, client: Any) -> int:
    """``check --upgrade 9``: pve8to9's API-observable checks, then the ones that need a shell."""
    from pve_steward.errors import PveError
    from pve_steward.pveio.client import api_path
    from pve_steward.pveio.compat import ConnectionProblem, check_cluster
    from pve_steward.serving.checkcmd import (
        Header,
        cluster_name,
        exit_code,
        json_body,
        print_error,
        print_report,
        shell_lines,
    )
    from pve_steward.tools.runs import upgrade_readiness

    now = time.time()

    async def run() -> tuple[Any, Header]:
        version = await check_cluster(settings, client)
        try:
            name = cluster_name(await client.get(api_path("cluster", "status")))
        except PveError:
            name = "unknown (/cluster/status could not be read)"
        return await upgrade_readiness(client, settings, now, None), Header(name, version, str(settings.token_id), now)

    try:
        result, header = asyncio.run(run())
    except ConnectionProblem as exc:
        return print_error("connection", str(exc), EXIT_UNKNOWN, args.json)
    except PveError as exc:
        return print_error("cluster", str(exc), EXIT_UNKNOWN, args.json)
    if args.json:  # each finding's level and each area's result, as `check --json`; ASCII: no control character
        body = {**result.model_dump(mode="json"), "report": json_body(result.report, header)}
        print(json.dumps(body, indent=2, ensure_ascii=True))
        return exit_code(result.report)
    shell = shell_lines([(c.name, c.what) for c in result.shell_checks], result.shell_advice, result.summary)
    if args.html or args.format == "markdown":
        return _emit(args, result.report, settings, client, header, shell)
    return print_report(result.report, False, args.color, header, extra=shell)


def cmd_docs(args: argparse.Namespace) -> int:
    from pve_steward.surface.docs import check_or_write
    from pve_steward.surface.registry import load_registry

    path = Path(args.output)
    if check_or_write(path, load_registry(), args.check):
        print(f"{path} is up to date" if args.check else f"wrote {path}")
        return 0
    return _fail(f"{path} is out of date: run `pve-steward docs` and commit the result", 1)


def default_audit_log(config: Path | None = None) -> Path:
    """The log `audit verify` reads without --file: the configured one (what `serve` writes) if it
    exists, else the demo's in the default state directory, else the configured path (to name it)."""
    configured = default_state_dir() / "audit.jsonl"
    with contextlib.suppress(ValueError):  # a broken setting elsewhere must not hide the log
        configured = load_settings(config).audit_log
    demo = default_state_dir() / "demo-audit.jsonl"
    if not configured.exists() and demo.exists():
        print(f"note: no audit log at {configured}; verifying the demo's log", file=sys.stderr)
        return demo
    if configured.exists() and demo.exists():
        print(f"note: the demo's audit log is {demo} (verify it with --file)", file=sys.stderr)
    return configured


def cmd_audit_verify(args: argparse.Namespace) -> int:
    """Exit 0 when the whole chain verifies, 1 when a record is broken, 2 when the file cannot be read."""
    from pve_steward.security.audit import verify

    if args.forwarded is not None:
        return verify_forwarded_stream(args.forwarded, args.json)

    path = Path(args.file) if args.file else default_audit_log(args.config)
    try:
        result = verify(path, anchor=args.anchor)
    except OSError as exc:
        return _fail(f"cannot read the audit log {path}: {exc.strerror}", 2)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif result.ok:
        print(f"{path}: OK, {result.records} records, chain intact; head {result.head}")
    else:
        where = f"line {result.first_bad_line}" if result.first_bad_line else "end of log"
        print(f"{path}: BROKEN at {where}: {result.problem} ({result.records} records verified before it)")
    if result.pending and not args.json:
        print(
            f"{len(result.pending)} write(s) have an 'executing' record and no outcome "
            "(see `pve-steward audit pending`): lines " + ", ".join(str(w.line) for w in result.pending)
        )
    return 0 if result.ok else 1


def verify_forwarded_stream(path: Path, as_json: bool) -> int:
    """Each replica's chain in a forwarded stream (security/audit.py verify_forwarded); exit as verify."""
    from pve_steward.security.audit import verify_forwarded

    try:
        chains = verify_forwarded(path)
    except OSError as exc:
        return _fail(f"cannot read the forwarded audit stream {path}: {exc.strerror}", 2)
    if as_json:
        print(json.dumps({k: [r.model_dump() for r in runs] for k, runs in chains.items()}, indent=2))
    for source, runs in chains.items():
        for n, result in enumerate(runs, start=1):
            label = source + (f" (chain {n} of {len(runs)})" if len(runs) > 1 else "")
            if as_json:
                continue
            if result.ok:
                print(f"{label}: OK, {result.records} records, chain intact; head {result.head}")
            else:
                print(f"{label}: BROKEN at line {result.first_bad_line}: {result.problem}")
    if not chains and not as_json:
        print(f"{path}: no pve-steward audit records found")
    return 0 if chains and all(r.ok for runs in chains.values() for r in runs) else 1


def cmd_audit_pending(args: argparse.Namespace) -> int:
    """Writes with an 'executing' record and no outcome; exit 0 when there are none, 1 when there are."""
    from pve_steward.security.audit import pending

    path = Path(args.file) if args.file else default_audit_log(args.config)
    if not path.exists():
        return _fail(f"cannot read the audit log {path}: no such file")
    try:
        writes = pending(path)
    except OSError as exc:
        return _fail(f"cannot read the audit log {path}: {exc.strerror}")
    if args.json:
        print(json.dumps([w.model_dump(mode="json") for w in writes], indent=2))
    elif not writes:
        print(f"{path}: no pending writes: every write started has a recorded outcome")
    else:
        print(f"{path}: {len(writes)} write(s) started with no recorded outcome; check each on the cluster:")
        for w in writes:
            task = f"task {w.upid} (check with get_task)" if w.upid else "no task id recorded (check list_tasks)"
            print(f"  line {w.line} {w.time or '?'} {w.operation} target={json.dumps(w.target)}: {task}")
    return 1 if writes else 0


def _add_demo(sub: Any, settings_flags: bool = True) -> None:
    demo = sub.add_parser(
        "demo",
        help="serve MCP against the built-in simulated cluster (pvesim)",
        description="Serve MCP against pvesim, a simulated Proxmox VE cluster started for the purpose. "
        "The demo picks the cluster and its API token itself, so the connection flags of serve do not apply.",
    )
    demo.add_argument("--stdio", action="store_true", help="use stdio (for desktop clients) instead of HTTP")
    demo.add_argument("--scenario", default="demo", help="pvesim scenario name or YAML path (default: demo)")
    demo.add_argument("--speed", type=float, default=10.0, help="simulated task speed factor (default: 10)")
    demo.add_argument(
        "--clusters",
        type=int,
        choices=[1, 2],
        default=1,
        help=f"2: a second simulated cluster ('{DEMO_SECOND}') beside the scenario's; every tool then takes "
        "a cluster argument (default: 1)",
    )
    demo.add_argument(
        "--state-dir",
        default=str(default_state_dir()),
        help="where the demo keeps its audit log, demo-audit.jsonl (default: %(default)s)",
    )
    if settings_flags:
        add_settings_flags(
            demo,
            [t for t in (*SECTIONS, OTHER) if not t.startswith("connection to Proxmox")],
            suppress=True,
            hidden=DEMO_REFUSES,
        )
    demo.set_defaults(func=cmd_demo)


def _add_check(sub: Any, settings_flags: bool = True) -> None:
    check = sub.add_parser(
        "check",
        help="run the diagnostics in the terminal (exit 0 ok, 1 warning, 2 critical, 3 unknown)",
        description="Run every diagnostic once and print it like pve8to9. Exit codes: 0 ok or only info, "
        "1 warning, 2 critical, 3 unknown (the check could not run), 64 usage or configuration error.",
    )
    check.add_argument("--json", action="store_true", help="print the report (or the error) as JSON")
    check.add_argument("--areas", default=None, help="comma-separated areas (default: all)")
    check.add_argument(
        "--upgrade",
        type=int,
        choices=[9],
        default=None,
        metavar="MAJOR",
        help="instead of the health check, check readiness for the upgrade to this PVE major release (9): "
        "pve8to9's API-observable checks, and a list of those that need a shell on the node",
    )
    check.add_argument(
        "--cluster", default=None, help="which [clusters.NAME] of the config file to check (default: the first)"
    )
    check.add_argument("--color", choices=["auto", "always", "never"], default="auto", help="(default: auto)")
    check.add_argument("--html", type=Path, metavar="FILE", help="also write the views as one self-contained HTML file")
    check.add_argument(
        "--format", choices=["text", "markdown"], default="text", help="markdown: for tickets (default: text)"
    )
    if settings_flags:
        add_settings_flags(check, CHECK_SECTIONS, suppress=True)
    check.set_defaults(func=cmd_check)


def _add_audit(sub: Any) -> None:
    audit = sub.add_parser("audit", help="work with the audit log", description="Work with the audit log.")
    audit_sub = audit.add_subparsers(dest="audit_command", metavar="action", required=True)
    verify = audit_sub.add_parser("verify", help="check the hash chain and name the first broken record")
    verify.add_argument(
        "--file",
        default=None,
        help=f"audit log path (default: the configured audit_log, {default_state_dir() / 'audit.jsonl'} unless "
        f"set; if that does not exist, the demo's {default_state_dir() / 'demo-audit.jsonl'})",
    )
    verify.add_argument("--config", type=Path, default=None, help="TOML file that sets audit_log, if any")
    verify.add_argument("--anchor", default=None, help="a head hash noted earlier; detects records cut from the end")
    verify.add_argument(
        "--forwarded",
        type=Path,
        default=None,
        help="a syslog receiver's file of forwarded records: verify each replica's chain in it",
    )
    verify.add_argument("--json", action="store_true", help="print the result as JSON")
    verify.set_defaults(func=cmd_audit_verify)
    pend = audit_sub.add_parser(
        "pending", help="list writes with an 'executing' record and no outcome (the process stopped mid-write)"
    )
    pend.add_argument("--file", default=None, help="audit log path (default: as for verify)")
    pend.add_argument("--config", type=Path, default=None, help="TOML file that sets audit_log, if any")
    pend.add_argument("--json", action="store_true", help="print the list as JSON")
    pend.set_defaults(func=cmd_audit_pending)


COMMANDS = ("serve", "demo", "tools", "check", "docs", "audit")


def _flagged(argv: typing.Sequence[str] | None) -> typing.Container[str] | None:
    """Which parsers get the settings' flags ("" is the top level; None: all). A start parses one command line:
    the flags of the four other commands were half the parser's work, 11 ms of every start (issue 43)."""
    if argv is None:
        return None
    if argv and argv[0] in COMMANDS:
        return (argv[0],)
    if not any(a in COMMANDS for a in argv):
        return ("",)  # `pve-steward --url ...` is serve at the top level: no command parses
    return None  # a command after flags, or a flag's value that reads like one: build every parser


def build_parser(argv: typing.Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; given the command line it will parse, only the parser that parses it gets the
    settings' flags."""
    flagged = _flagged(argv)

    def wanted(command: str) -> bool:
        return flagged is None or command in flagged

    parser = Parser(prog="pve-steward", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"pve-steward {__version__}")
    if wanted(""):  # `pve-steward --url ...` = serve
        add_settings_flags(parser, sections=(), hidden=tuple(Settings.model_fields))
    parser.set_defaults(func=cmd_serve)
    sub = parser.add_subparsers(dest="command", metavar="command")
    serve = sub.add_parser(
        "serve",
        help="serve MCP against a cluster (the default command)",
        description="Serve MCP (stdio or HTTP) against a Proxmox VE cluster. A flag beats the environment "
        "variable, which beats the --config file.",
    )
    if wanted("serve"):
        add_settings_flags(serve, suppress=True)
    serve.set_defaults(func=cmd_serve)
    _add_demo(sub, wanted("demo"))
    tools = sub.add_parser(
        "tools",
        help="print the tool catalog for the current mode",
        description="Print the tools a client would see with these settings (no cluster needed).",
    )
    tools.add_argument("--json", action="store_true", help="full tools/list entries as JSON")
    if wanted("tools"):
        add_settings_flags(tools, ["tools registered"], suppress=True)
    tools.set_defaults(func=cmd_tools)
    _add_check(sub, wanted("check"))
    docs = sub.add_parser("docs", help="regenerate docs/tools.md, docs/rules.md and docs/checks.md from the registries")
    docs.add_argument("--output", default="docs/tools.md")
    docs.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    docs.set_defaults(func=cmd_docs)
    _add_audit(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.func(args))
    except ValidationError as exc:
        return _fail(describe(exc))
    except (ConfigError, ValueError) as exc:  # a RegistryError (bad tools file) is a ValueError too
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
