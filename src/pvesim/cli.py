"""``pvesim``: serve a simulated Proxmox VE cluster, or generate a large scenario."""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import socket
import sys
from importlib import metadata
from pathlib import Path

import yaml

from pvesim.access import ROLES, Token
from pvesim.bound import Bound
from pvesim.generator import generate
from pvesim.scenario import build_cluster, builtin_scenarios, faults_from, load_scenario
from pvesim.server import SimServer, stop_on_sigterm

DESCRIPTION = "pvesim: serve a simulated Proxmox VE cluster over HTTPS, or generate a large scenario."


def _serve(args: argparse.Namespace) -> int:
    try:
        data = load_scenario(args.scenario)
        cluster = build_cluster(data, version=args.version, speed=args.speed)
    except (ValueError, OSError) as exc:
        print(f"pvesim: {exc}", file=sys.stderr)
        return 2
    if args.port and not _port_free(args.host, args.port):
        print(
            f"pvesim: port {args.port} on {args.host} is in use; choose another with --port (0 picks a free one)",
            file=sys.stderr,
        )
        return 1
    faults = faults_from(data)
    if args.pveproxy_bound and faults.pveproxy is None:
        faults.pveproxy = Bound()
    stop_on_sigterm()  # before the simulator makes its temporary key: SIGTERM removes it
    server = SimServer(cluster, host=args.host, port=args.port, faults=faults, log_level=args.log_level)
    try:
        server.start()  # binds first: the lines below show the real port (also for --port 0)
    except RuntimeError as exc:
        print(f"pvesim: {exc}; choose another --port (0 picks a free one)", file=sys.stderr)
        return 1
    _settle_heap()
    print(
        f"pvesim: scenario '{data.get('name', args.scenario)}', PVE {cluster.version} "
        f"(API schema {cluster.schema_version}), {len(cluster.nodes)} nodes, {len(cluster.guests)} guests"
    )
    print(f"URL:         https://{server.address}/api2/json")
    print(f"Fingerprint: {server.fingerprint}")
    print(f"Certificate: {server.cert_path}")
    for token in cluster.tokens.values():
        print(f"Token:       {token.full_id}  secret={token.secret}  ({token_roles(token)})")
    print(f"Control:     X-Pvesim-Control: {server.control_secret}  (POST https://{server.address}/_sim/...)")
    sys.stdout.flush()
    with contextlib.suppress(KeyboardInterrupt):
        server.wait()
    server.stop()
    return 0


def token_roles(token: Token) -> str:
    """Which roles a token holds where, as PVE grants them: its own ACL entries with privilege separation
    (narrowed by its user's), else its user's; root@pam holds every privilege whatever the ACL says."""
    if token.user.userid == "root@pam" and not token.privsep:
        return "root@pam: every privilege"
    entries = token.acl if token.privsep else token.user.acl
    by_path: dict[str, list[str]] = {}
    for entry in entries:
        by_path.setdefault(entry.path, []).append(entry.role)
    roles = "; ".join(f"{' + '.join(names)} on {path}" for path, names in by_path.items()) or "no role"
    custom = sorted({e.role for e in entries} - set(ROLES))  # the scenario's own roles: say what they hold
    held = "".join(f"; {name} = {', '.join(sorted(token.roles.get(name, ())))}" for name in custom)
    return f"roles: {roles}{held}"


def _settle_heap() -> None:
    """Keep the built cluster out of the garbage collector's full collections, and collect less often.

    A 2,000-guest cluster is about a million objects that are never garbage, and every full collection
    walked them: 30-35 ms under load (100 ms at start-up), a stall of the one event loop that serves every
    request, where PVE's Perl frees by reference counts and never pauses (issue 17, design record
    261204-41). The answers pvesim builds are rows of plain values, without cycles.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (so a taken port is one line, not uvicorn's log and ours)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host.strip("[]"), port))
    except OSError as exc:
        return exc.errno != errno.EADDRINUSE
    return True


def _generate(args: argparse.Namespace) -> int:
    data = generate(
        nodes=args.nodes, guests=args.guests, seed=args.seed, concentrate=args.concentrate, node_memory=args.node_memory
    )
    text = yaml.safe_dump(data, sort_keys=False)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}: {args.nodes} nodes, {args.guests} guests")
    else:
        sys.stdout.write(text)
    return 0


def _docs(args: argparse.Namespace) -> int:
    """Write the scenario format's reference page (or, with --check, fail when it is stale)."""
    from pvesim.scenariodoc import render

    text = render()
    path = Path(args.output)
    if args.check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"pvesim: {path} is out of date; run `pvesim docs`", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


def _version() -> str:
    """The version of the distribution that ships pvesim (pvesim has no release of its own)."""
    try:
        return metadata.version("pve-steward")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pvesim", description=DESCRIPTION)
    ap.add_argument("--version", action="version", version=f"pvesim {_version()} (simulates Proxmox VE 8.4 and 9.1)")
    sub = ap.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a scenario over HTTPS")
    serve.add_argument("--scenario", default="demo", help=f"built-in ({', '.join(builtin_scenarios())}) or a YAML path")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8006, help="HTTPS port, 0 for a free one (default: 8006)")
    serve.add_argument(
        "--pve-version", "--version", dest="version", default=None, help="PVE version to present, e.g. 8.4.14 or 9.1.2"
    )
    serve.add_argument("--speed", type=float, default=None, help="simulated-time speed factor for tasks")
    serve.add_argument("--log-level", default="warning")
    serve.add_argument(
        "--pveproxy-bound",
        action="store_true",
        help="serve as PVE's nodes do: 3 pveproxy and 3 pvedaemon workers per node, a cost per request "
        "(the scenario's faults.pveproxy sets other values; bound.py)",
    )
    serve.set_defaults(func=_serve)
    gen = sub.add_parser("generate", help="write a synthetic large scenario as YAML")
    gen.add_argument("--nodes", type=int, default=20)
    gen.add_argument("--guests", type=int, default=2000)
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--concentrate", type=int, default=0, help="put this many guests on the first node")
    gen.add_argument("--node-memory", default="768G")
    gen.add_argument("-o", "--output", default=None)
    gen.set_defaults(func=_generate)
    docs = sub.add_parser("docs", help="write the scenario format's reference page (docs/scenarios.md)")
    docs.add_argument("-o", "--output", default="docs/scenarios.md")
    docs.add_argument("--check", action="store_true", help="exit 1 when the page is out of date")
    docs.set_defaults(func=_docs)
    lst = sub.add_parser("scenarios", help="list built-in scenarios")
    lst.set_defaults(func=lambda a: print("\n".join(builtin_scenarios())) or 0)
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
