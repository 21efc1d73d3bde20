"""The MCP Bundle (``make mcpb``): a valid manifest, a reproducible zip, and a server that runs from it.

The manifest is checked against the MCPB project's own schema and CLI (``@anthropic-ai/mcpb``,
installed with the other interop clients by ``scripts/interop/setup.sh``). The bundle is then
unpacked and started the way Claude Desktop starts it: ``server.mcp_config`` with ``${__dirname}``
and the ``${user_config.*}`` values filled in, against a running pvesim.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator

from pve_steward.config import ENV_PREFIX, Settings, load_settings
from pvesim.server import SimServer
from tests.packaging.conftest import DEMO_TOOLS, ROOT, VERSION, clean_env, demo_session, dev_tool, run

pytestmark = pytest.mark.anyio
MANIFEST: dict[str, Any] = json.loads((ROOT / "manifest.json").read_text(encoding="utf-8"))
INTEROP = ROOT / ".interop"
MCPB_PACKAGE = INTEROP / "node_modules" / "@anthropic-ai" / "mcpb"
needs_mcpb = pytest.mark.skipif(
    not (INTEROP / "bin" / "node").exists() or not MCPB_PACKAGE.exists(),
    reason="run scripts/interop/setup.sh to install the MCPB CLI and schemas (@anthropic-ai/mcpb)",
)
USER_CONFIG_RE = re.compile(r"\$\{user_config\.([A-Za-z0-9_]+)\}")


def build_bundle(out: Path) -> Path:
    done = run([sys.executable, str(ROOT / "scripts" / "build_mcpb.py"), "--out-dir", str(out)], os.environ, cwd=ROOT)
    bundle = out / f"pve-steward-{VERSION}.mcpb"
    assert done.stdout.split()[0] == str(bundle)
    return bundle


def mcpb_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    node = INTEROP / "bin" / "node"
    env = {**os.environ, "HOME": str(INTEROP / "home"), "PATH": f"{node.parent}:{os.environ['PATH']}"}
    cli = INTEROP / "node_modules" / ".bin" / "mcpb"
    return subprocess.run(
        [str(node), str(cli), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_bundle_is_a_reproducible_zip_of_the_package(tmp_path: Path) -> None:
    first = build_bundle(tmp_path / "a")
    second = build_bundle(tmp_path / "b")
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    with zipfile.ZipFile(first) as bundle:
        names = set(bundle.namelist())
        assert json.loads(bundle.read("manifest.json")) == MANIFEST
    assert {"manifest.json", "pyproject.toml", "uv.lock", "README.md", MANIFEST["server"]["entry_point"]} <= names
    assert "src/pve_steward/tools.yaml" in names and "src/pvesim/scenarios/demo.yaml" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") or n.startswith((".venv", "tests/")) for n in names)


def test_manifest_agrees_with_the_package() -> None:
    assert MANIFEST["version"] == VERSION
    config = MANIFEST["server"]["mcp_config"]
    settings = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    assert set(config["env"]) <= settings, f"not settings: {set(config['env']) - settings}"
    used = {m for value in [*config["args"], *config["env"].values()] for m in USER_CONFIG_RE.findall(value)}
    assert used == set(MANIFEST["user_config"]), "every user_config entry is used, and only those exist"
    assert MANIFEST["user_config"]["token_secret"]["sensitive"] is True


def test_an_optional_entry_left_empty_is_unset_for_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host passes an optional entry the user left blank as an empty variable: the server reads it as
    unset, so neither a CA file nor a fingerprint is required (a certificate the system trusts needs none)."""
    config = MANIFEST["server"]["mcp_config"]
    user_config = {k: "" for k, v in MANIFEST["user_config"].items() if not v.get("required")}
    user_config |= {"url": "pve1.example.com:8006", "token_id": "steward@pve!mcp", "token_secret": "s3cret"}
    assert {"ca_file", "fingerprint"} <= set(user_config) and not user_config["ca_file"]
    for key in [k for k in os.environ if k.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(key)
    for key, value in config["env"].items():
        monkeypatch.setenv(key, substitute(value, ROOT, user_config))
    settings = load_settings()
    assert (settings.ca_file, settings.fingerprint, settings.tier.value) == (None, None, "read_only")
    assert MANIFEST["user_config"]["ca_file"]["type"] == "file" and "PVE_STEWARD_CA_FILE" in config["env"]


def test_the_bundle_installs_what_its_lock_file_pins() -> None:
    """uv.lock ships in the bundle and `uv run --frozen` installs from it; the lock matches pyproject.toml."""
    assert "--frozen" in MANIFEST["server"]["mcp_config"]["args"]
    done = run([dev_tool("uv"), "lock", "--check", "--offline"], clean_env(), cwd=ROOT)
    assert "Resolved" in done.stdout + done.stderr


@needs_mcpb
def test_manifest_is_valid_against_the_mcpb_schema(tmp_path: Path) -> None:
    schema_file = MCPB_PACKAGE / "dist" / f"mcpb-manifest-v{MANIFEST['manifest_version']}.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    assert list(Draft7Validator(schema).iter_errors(MANIFEST)) == []
    bundle = build_bundle(tmp_path)
    unpacked = tmp_path / "unpacked"
    assert mcpb_cli("unpack", str(bundle), str(unpacked), cwd=tmp_path).returncode == 0
    checked = mcpb_cli("validate", str(unpacked / "manifest.json"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    broken = {**MANIFEST, "server": {**MANIFEST["server"], "type": "jar"}}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    assert mcpb_cli("validate", str(tmp_path / "broken.json"), cwd=tmp_path).returncode != 0  # the CLI does check


def substitute(value: str, dirname: Path, user_config: dict[str, str]) -> str:
    value = value.replace("${__dirname}", str(dirname))
    return USER_CONFIG_RE.sub(lambda m: user_config[m.group(1)], value)


async def test_bundle_serves_mcp_as_claude_desktop_starts_it(
    tmp_path: Path, start_sim: Callable[..., SimServer]
) -> None:
    sim = start_sim("demo")
    token_id, secret = sim.token("operator@pve!mcp")
    user_config = {
        "url": sim.address,
        "token_id": token_id,
        "token_secret": secret,
        "ca_file": str(sim.cert_path),  # a CA path, no fingerprint: pvesim's certificate signs itself
        "fingerprint": "",
        "tier": "operator",
    }
    unpacked = tmp_path / "extension"
    with zipfile.ZipFile(build_bundle(tmp_path)) as bundle:
        bundle.extractall(unpacked)
    config = MANIFEST["server"]["mcp_config"]
    command = dev_tool("uv") if config["command"] == "uv" else config["command"]
    args = [substitute(a, unpacked, user_config) for a in config["args"]]
    env = clean_env(
        XDG_STATE_HOME=str(tmp_path / "state"),
        **{k: substitute(v, unpacked, user_config) for k, v in config["env"].items()},
    )
    session = await demo_session(command, args, env, cwd=tmp_path)
    assert session.tools >= DEMO_TOOLS
    assert (session.server, session.version, session.cluster_name) == ("pve-steward", VERSION, "demo")
    assert (tmp_path / "state" / "pve-steward" / "audit.jsonl").exists()


def test_bundle_entry_point_runs_as_a_uv_host_runs_it(tmp_path: Path) -> None:
    """Hosts that manage uv bundles themselves run ``server.entry_point`` with ``uv run`` in the bundle."""
    unpacked = tmp_path / "extension"
    with zipfile.ZipFile(build_bundle(tmp_path)) as bundle:
        bundle.extractall(unpacked)
    entry = MANIFEST["server"]["entry_point"]
    done = run([dev_tool("uv"), "run", "--directory", str(unpacked), entry, "--version"], clean_env(), cwd=tmp_path)
    assert done.stdout.strip() == f"pve-steward {VERSION}"
