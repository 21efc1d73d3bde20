"""Clients we did not write: the official MCP Inspector CLI (stdio and HTTP) and conformance suite.

They are installed by ``scripts/interop/setup.sh`` (``.ci/run`` does it); without them these tests
are skipped with that instruction.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.httpserver import free_port, serving
from tests.untrusted import is_marked, plain

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / ".interop"
NODE = INTEROP / "bin" / "node"
INSPECTOR = INTEROP / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = pytest.mark.skipif(
    not (NODE.exists() and INSPECTOR.exists()), reason="run scripts/interop/setup.sh to install the MCP clients"
)
DEMO = [sys.executable, "-m", "pve_steward", "demo"]


def inspector(*args: str, timeout: float = 90, rc: int = 0) -> dict[str, Any]:
    """Run the Inspector CLI; return its first JSON answer (rc 5 is how it reports a tool error)."""
    env = {**os.environ, "HOME": str(INTEROP / "home"), "PATH": f"{NODE.parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        [str(NODE), str(INSPECTOR), "--cli", *args, "--format", "json", "--connect-timeout", "60000"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == rc, (args, done.stdout[-2000:], done.stderr[-2000:])
    out = done.stdout if "{" in done.stdout else done.stderr  # errors are printed to stderr
    start = out.index('{"')
    answer, _ = json.JSONDecoder().raw_decode(out[start:])
    assert isinstance(answer, dict)
    return answer


def _text(answer: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(answer["result"]["content"][0]["text"])
    return body


def test_inspector_over_stdio(tmp_path: Path) -> None:
    """The Inspector starts our command for each call, as a desktop client does: list, read, preview, refuse.

    Each call is a new server (and demo cluster), so this test makes only the calls that differ by transport;
    the other methods go over HTTP to one server (below)."""
    stdio = [*DEMO, "--stdio", "--state-dir", str(tmp_path)]
    tools = inspector(*stdio, "--method", "tools/list")["result"]["tools"]
    assert {t["name"] for t in tools} >= {"cluster", "guests", "diagnostics", "operate"}
    guest = _text(
        inspector(
            *stdio,
            "--method",
            "tools/call",
            "--tool-name",
            "guests",
            "--tool-args-json",
            '{"action": "get_guest", "vmid": 113}',
        )
    )
    assert plain(guest["result"])["vmid"] == 113 and is_marked(guest["result"], "description")
    preview = _text(
        inspector(
            *stdio,
            "--method",
            "tools/call",
            "--tool-name",
            "operate",
            "--tool-args-json",
            '{"action": "guest_start", "vmid": 113}',
        )
    )
    assert preview["result"]["status"] == "preview" and preview["result"]["confirm_token"]
    bad = inspector(
        *stdio,
        "--method",
        "tools/call",
        "--tool-name",
        "guests",
        "--tool-args-json",
        '{"action": "get_guest", "vmid": 5}',
        rc=5,
    )
    assert bad["result"]["isError"] is True and "vmid" in bad["result"]["content"][0]["text"]


@pytest.fixture(scope="module")
def demo_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """One demo server over HTTP for this module's calls (they read, and set only the log level)."""
    port = free_port()
    state = tmp_path_factory.mktemp("demo-http")
    with serving([*DEMO, "--http-port", str(port), "--state-dir", str(state)], port, cwd=ROOT) as base:
        yield [f"{base}/mcp", "--transport", "http"]


def test_inspector_over_http(demo_http: list[str]) -> None:
    tools = inspector(*demo_http, "--method", "tools/list")["result"]["tools"]
    assert "diagnostics" in {t["name"] for t in tools}
    overview = _text(
        inspector(
            *demo_http, "--method", "tools/call", "--tool-name", "cluster", "--tool-arg", "action=cluster_overview"
        )
    )
    assert plain(overview)["result"]["cluster_name"] == "demo" and is_marked(overview["result"], "cluster_name")
    health = _text(
        inspector(
            *demo_http, "--method", "tools/call", "--tool-name", "diagnostics", "--tool-arg", "action=diagnose_backups"
        )
    )
    assert health["action"] == "diagnose_backups" and health["result"]["status"] in ("warning", "critical")
    prompts = inspector(*demo_http, "--method", "prompts/list")["result"]["prompts"]
    names = {p["name"] for p in prompts}
    assert len(prompts) == 7 and names >= {"health_review", "backup_audit", "maintenance_preparation", "guest_review"}
    node = inspector(*demo_http, "--method", "resources/read", "--uri", "pve-steward://nodes/pve2")["result"]
    status = json.loads(node["contents"][0]["text"])["status"]
    assert plain(status)["node"] == "pve2" and is_marked(status, "node")


def test_inspector_reads_resources_and_sets_the_log_level(demo_http: list[str]) -> None:
    listed = inspector(*demo_http, "--method", "resources/list")["result"]["resources"]
    assert {r["uri"] for r in listed if r["uri"].startswith("pve-steward://")} == {
        "pve-steward://codes",
        "pve-steward://cluster",
    }
    templates = inspector(*demo_http, "--method", "resources/templates/list")["result"]["resourceTemplates"]
    assert "pve-steward://guests/{vmid}" in {t["uriTemplate"] for t in templates}
    guest = inspector(*demo_http, "--method", "resources/read", "--uri", "pve-steward://guests/113")["result"]
    body = json.loads(guest["contents"][0]["text"])
    assert body["vmid"] == 113 and is_marked(body, "description")
    assert inspector(*demo_http, "--method", "logging/setLevel", "--log-level", "debug") == {"result": {}}
    missing = inspector(*demo_http, "--method", "prompts/get", "--prompt-name", "nope", rc=1)
    assert missing["error"]["message"].startswith("no prompt 'nope'; prompts are:")


def test_conformance_suite_passes_its_baseline() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "interop" / "conformance.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "CONFORMANCE_OUT": str(INTEROP / "results" / "conformance-test")},
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "all failures are expected" in done.stdout
