"""``pve-steward``: serve MCP (stdio or HTTP), run the demo, list tools.

Every option of :class:`~pve_steward.config.Settings` is a flag here (generated from the
settings fields), so ``--help`` documents all of them with their environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from pve_steward import __version__
from pve_steward.config import ENV_PREFIX, Settings, load_settings
from pve_steward.registry import RegistryError


def _flag_type(annotation: Any) -> tuple[Any, bool]:
    """(argparse type, is_bool) for a settings field annotation."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = args[0] if typing.get_origin(annotation) in (typing.Union, types.UnionType) and args else annotation
    if base is bool:
        return None, True
    if base in (int, float):
        return base, False
    if base is Path:
        return Path, False
    return str, False


def add_settings_flags(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    group = parser.add_argument_group("settings (flag > env PVE_STEWARD_* > --config TOML > default)")
    group.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS if suppress else None,
        help=f"TOML file with any of the settings below (env {ENV_PREFIX}CONFIG)",
    )
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        env = ENV_PREFIX + name.upper()
        conv, is_bool = _flag_type(field.annotation)
        default = argparse.SUPPRESS if suppress else None
        help_text = f"{field.description} (env {env})"
        if is_bool:
            group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        else:
            group.add_argument(flag, dest=name, type=conv, default=default, help=help_text, metavar=name.upper())


def settings_from(args: argparse.Namespace, **extra: Any) -> Settings:
    overrides = {name: getattr(args, name, None) for name in Settings.model_fields}
    overrides.update(extra)
    secret = overrides.get("token_secret")
    if isinstance(secret, str):
        overrides["token_secret"] = SecretStr(secret)
    return load_settings(getattr(args, "config", None), **overrides)


def describe(exc: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
    return f"invalid configuration: {problems}"


def _fail(message: str, code: int = 2) -> int:
    print(f"pve-steward: {message}", file=sys.stderr)
    return code


def cmd_serve(args: argparse.Namespace) -> int:
    from pve_steward.client import ProxmoxerClient
    from pve_steward.server import ConnectionProblem, build_server, check_cluster

    settings = settings_from(args)
    if settings.transport == "http":
        from pve_steward.http import check_bind

        check_bind(settings)  # before touching the cluster: an unsafe bind is a configuration error
    client = ProxmoxerClient(settings)
    try:
        asyncio.run(check_cluster(settings, client))
    except ConnectionProblem as exc:
        return _fail(str(exc), 3)
    mcp = build_server(settings, client=client, check_version_on_start=False)  # checked just above
    return run_transport(mcp, settings)


def run_transport(mcp: Any, settings: Settings) -> int:
    if settings.transport == "stdio":
        mcp.run()
    else:
        from pve_steward.http import run_http

        run_http(mcp, settings)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Start pvesim with a scenario and serve MCP against it over HTTPS, like any cluster."""
    import pvesim  # the only place the server side touches the simulator
    from pve_steward.server import build_server

    out = sys.stderr if args.stdio else sys.stdout
    sim = pvesim.start_scenario(args.scenario, speed=args.speed)
    token_id, secret = sim.token("operator@pve!mcp")
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {
        "url": sim.address,
        "token_id": token_id,
        "token_secret": secret,
        "fingerprint": sim.fingerprint,
        "transport": "stdio" if args.stdio else "http",
    }
    if getattr(args, "audit_log", None) is None:
        extra["audit_log"] = state / "demo-audit.jsonl"
    if getattr(args, "tier", None) is None and not getattr(args, "read_only", None):
        extra["tier"] = "operator"
    settings = settings_from(args, **extra)
    mcp = build_server(settings)
    print(f"pvesim: simulated cluster '{args.scenario}' at {sim.url} (fingerprint {sim.fingerprint[:23]}...)", file=out)
    print(f"tier: {settings.tier.value}; audit log: {settings.audit_log}", file=out)
    if not args.stdio:
        url = f"http://{settings.http_host}:{settings.http_port}/mcp"
        print(f"MCP endpoint: {url}", file=out)
        print(
            f"Try it:  npx @modelcontextprotocol/inspector --cli {url} --transport http --method tools/list", file=out
        )
        print("Press Ctrl-C to stop.", file=out)
    out.flush()
    try:
        return run_transport(mcp, settings)
    except KeyboardInterrupt:
        return 0
    finally:
        sim.stop()


def cmd_tools(args: argparse.Namespace) -> int:
    from mcp import Client

    from pve_steward.server import build_server
    from pve_steward.testing import FakeClient

    async def listing() -> list[Any]:
        async with Client(mcp) as c:
            return list((await c.list_tools()).tools)

    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_from(args, audit_log=Path(tmp) / "audit.jsonl")
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
    print(f"{len(tools)} tools", file=sys.stderr)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Run the diagnostics once and print them; exit code by worst severity (0/1/2, 3 = could not check)."""
    from pve_steward.analysis.health import AREAS
    from pve_steward.checkcmd import EXIT_UNKNOWN, print_report
    from pve_steward.client import ProxmoxerClient
    from pve_steward.errors import PveError
    from pve_steward.server import ConnectionProblem, check_cluster
    from pve_steward.tools.diagnostics import run_check

    areas = [a.strip() for a in args.areas.split(",")] if args.areas else list(AREAS)
    unknown = sorted(set(areas) - set(AREAS))
    if unknown:
        return _fail(f"unknown area(s) {', '.join(unknown)}; choose from {', '.join(AREAS)}", EXIT_UNKNOWN)
    try:
        settings = settings_from(args)
        client = ProxmoxerClient(settings)

        async def run() -> Any:
            await check_cluster(settings, client)
            return await run_check(client, settings, time.time(), areas, None)

        report = asyncio.run(run())
    except ValidationError as exc:
        return _fail(describe(exc), EXIT_UNKNOWN)
    except (ConnectionProblem, PveError, ValueError) as exc:
        return _fail(str(exc), EXIT_UNKNOWN)
    if args.html or args.format == "markdown":
        from pve_steward.views.report import emit

        return emit(args, report, settings, client)
    return print_report(report, args.json, args.color)


def cmd_docs(args: argparse.Namespace) -> int:
    from pve_steward.docs import check_or_write
    from pve_steward.registry import load_registry

    path = Path(args.output)
    if check_or_write(path, load_registry(), args.check):
        print(f"{path} is up to date" if args.check else f"wrote {path}")
        return 0
    return _fail(f"{path} is out of date: run `pve-steward docs` and commit the result", 1)


def cmd_audit_verify(args: argparse.Namespace) -> int:
    """Exit 0 when the whole chain verifies, 1 when a record is broken, 2 when the file cannot be read."""
    from pve_steward.config import default_state_dir
    from pve_steward.security.audit import verify

    path = Path(args.file) if args.file else default_state_dir() / "audit.jsonl"
    try:
        result = verify(path, anchor=args.anchor)
    except OSError as exc:
        return _fail(f"cannot read the audit log {path}: {exc.strerror}")
    if args.json:
        print(result.model_dump_json(indent=2))
    elif result.ok:
        print(f"{path}: OK, {result.records} records, chain intact; head {result.head}")
    else:
        where = f"line {result.first_bad_line}" if result.first_bad_line else "end of log"
        print(f"{path}: BROKEN at {where}: {result.problem} ({result.records} records verified before it)")
    return 0 if result.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pve-steward", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"pve-steward {__version__}")
    add_settings_flags(parser)
    parser.set_defaults(func=cmd_serve)
    sub = parser.add_subparsers(dest="command", metavar="command")
    serve = sub.add_parser("serve", help="serve MCP against a cluster (the default command)")
    add_settings_flags(serve, suppress=True)
    serve.set_defaults(func=cmd_serve)
    demo = sub.add_parser("demo", help="serve MCP against the built-in simulated cluster (pvesim)")
    demo.add_argument("--stdio", action="store_true", help="use stdio (for desktop clients) instead of HTTP")
    demo.add_argument("--scenario", default="demo", help="pvesim scenario name or YAML path")
    demo.add_argument("--speed", type=float, default=10.0, help="simulated task speed factor")
    demo.add_argument(
        "--state-dir",
        default=str(Path.home() / ".local" / "state" / "pve-steward"),
        help="where the demo keeps its audit log",
    )
    add_settings_flags(demo, suppress=True)
    demo.set_defaults(func=cmd_demo)
    tools = sub.add_parser("tools", help="print the tool catalog for the current mode")
    tools.add_argument("--json", action="store_true", help="full tools/list entries as JSON")
    add_settings_flags(tools, suppress=True)
    tools.set_defaults(func=cmd_tools)
    check = sub.add_parser(
        "check", help="run the diagnostics in the terminal (exit 0 ok, 1 warning, 2 critical, 3 unknown)"
    )
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--areas", default=None, help="comma-separated areas (default: all)")
    check.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    check.add_argument("--html", type=Path, metavar="FILE", help="also write the views as one self-contained HTML file")
    check.add_argument("--format", choices=["text", "markdown"], default="text", help="markdown: for tickets")
    add_settings_flags(check, suppress=True)
    check.set_defaults(func=cmd_check)
    docs = sub.add_parser("docs", help="regenerate docs/tools.md and docs/rules.md from the registries")
    docs.add_argument("--output", default="docs/tools.md")
    docs.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    docs.set_defaults(func=cmd_docs)
    audit = sub.add_parser("audit", help="work with the audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", metavar="action", required=True)
    verify = audit_sub.add_parser("verify", help="check the hash chain and name the first broken record")
    verify.add_argument("--file", default=None, help="audit log path (default: the configured default location)")
    verify.add_argument("--anchor", default=None, help="a head hash noted earlier; detects records cut from the end")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")
    verify.set_defaults(func=cmd_audit_verify)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ValidationError as exc:
        return _fail(describe(exc))
    except (ValueError, RegistryError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
