"""Packaging tests: what a user installs (wheel via uvx/pipx, container image, MCP bundle) really runs.

The wheel is built once per session into a temporary directory, never from the editable checkout,
and each install path starts a fresh environment from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.untrusted import is_marked, plain

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION: str = PROJECT["version"]
DEMO_TOOLS = {"cluster", "guests", "diagnostics", "operate"}  # the demo's meta-tools at tier operator


def dev_tool(name: str) -> str:
    """A dev dependency's command (uv, uvx, pipx) from this venv, else from PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: it is a dev dependency, run `pip install -e '.[dev]'`")
    return found


def clean_env(**extra: str) -> dict[str, str]:
    """The user's environment without this venv or checkout on any path, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env = {k: v for k, v in env.items() if not k.startswith("PVE_STEWARD_")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(extra)
    return env


def run(cmd: list[str], env: Mapping[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@dataclass(frozen=True)
class Session:
    tools: set[str]
    server: str
    version: str
    cluster_name: str


async def demo_session(command: str, args: list[str], env: Mapping[str, str], cwd: Path) -> Session:
    """A real MCP session over stdio with a demo server: tools/list, then one read of the simulated cluster."""
    params = StdioServerParameters(command=command, args=args, env=dict(env), cwd=cwd)
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        overview = await client.call_tool("cluster", {"action": "cluster_overview"})
        info = client.server_info
    assert info is not None, "the server sent no serverInfo"
    assert not overview.is_error, overview.content
    result = (overview.structured_content or {}).get("result", {})
    assert is_marked(result, "cluster_name"), result  # cluster text, marked as such
    return Session(names, info.name, info.version, str(plain(result)["cluster_name"]))


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once from the sources into a temporary directory."""
    out = tmp_path_factory.mktemp("dist")
    run([dev_tool("uv"), "build", "--wheel", "--out-dir", str(out), str(ROOT)], clean_env(), cwd=out)
    (built,) = out.glob("pve_steward-*.whl")
    assert built.name == f"pve_steward-{VERSION}-py3-none-any.whl"
    return built
