"""The README's install paths, from the built wheel in fresh environments: ``uvx`` and ``pipx``.

Until the first PyPI release the tests point uvx/pipx at the wheel instead of the package name;
everything after the install (the console script, ``--help``, an MCP session) is what users get.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packaging.conftest import DEMO_TOOLS, ROOT, VERSION, clean_env, demo_session, dev_tool, run

pytestmark = pytest.mark.anyio


def test_uvx_runs_help_from_the_wheel(wheel: Path, tmp_path: Path) -> None:
    env = clean_env(UV_TOOL_DIR=str(tmp_path / "tools"))
    done = run([dev_tool("uvx"), "--isolated", "--from", str(wheel), "pve-steward", "--help"], env, cwd=tmp_path)
    assert done.stdout.startswith("usage: pve-steward")
    assert "demo" in done.stdout and "serve" in done.stdout
    serve = run(
        [dev_tool("uvx"), "--isolated", "--from", str(wheel), "pve-steward", "serve", "--help"], env, cwd=tmp_path
    )
    assert "--token-id" in serve.stdout
    probe = ["python", "-c", "import pve_steward; print(pve_steward.__file__)"]
    where = run([dev_tool("uvx"), "--isolated", "--from", str(wheel), *probe], env, cwd=tmp_path).stdout.strip()
    assert not where.startswith(str(ROOT)), f"uvx imported the checkout, not the wheel: {where}"


async def test_uvx_serves_mcp_over_stdio(wheel: Path, tmp_path: Path) -> None:
    """The runtime alone serves the demo: no uvloop (a dev extra), so pvesim serves on asyncio's loop, as
    `make demo` on a fresh clone does."""
    env = clean_env(UV_TOOL_DIR=str(tmp_path / "tools"))
    probe = ["python", "-c", "import importlib.util as u; print(u.find_spec('uvloop') is None)"]
    assert (
        run([dev_tool("uvx"), "--isolated", "--from", str(wheel), *probe], env, cwd=tmp_path).stdout.strip() == "True"
    )
    demo = ["pve-steward", "demo", "--stdio", "--state-dir", str(tmp_path / "state")]
    args = ["--isolated", "--from", str(wheel), *demo]
    session = await demo_session(dev_tool("uvx"), args, env, cwd=tmp_path)
    assert session.tools >= DEMO_TOOLS
    assert (session.server, session.version, session.cluster_name) == ("pve-steward", VERSION, "demo")
    assert (tmp_path / "state" / "demo-audit.jsonl").exists()


@pytest.fixture
def pipx_install(wheel: Path, tmp_path: Path) -> Path:
    """``pipx install`` of the wheel with PIPX_HOME and PIPX_BIN_DIR in a temporary directory."""
    home, bin_dir = tmp_path / "pipx", tmp_path / "bin"
    env = clean_env(PIPX_HOME=str(home), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "man"))
    run([dev_tool("pipx"), "install", str(wheel)], env, cwd=tmp_path)
    return bin_dir


def test_pipx_install_puts_the_command_on_path(pipx_install: Path, tmp_path: Path) -> None:
    command = pipx_install / "pve-steward"
    assert command.exists() and (pipx_install / "pvesim").exists()
    env = clean_env()
    assert run([str(command), "--version"], env, cwd=tmp_path).stdout.strip() == f"pve-steward {VERSION}"
    assert run([str(command), "--help"], env, cwd=tmp_path).stdout.startswith("usage: pve-steward")
    venv_python = command.resolve().parent / "python"
    where = run([str(venv_python), "-c", "import pve_steward; print(pve_steward.__file__)"], env, cwd=tmp_path)
    assert where.stdout.strip().startswith(str(tmp_path / "pipx")), where.stdout


async def test_pipx_installed_command_serves_mcp_over_stdio(pipx_install: Path, tmp_path: Path) -> None:
    args = ["demo", "--stdio", "--state-dir", str(tmp_path / "state")]
    session = await demo_session(str(pipx_install / "pve-steward"), args, clean_env(), cwd=tmp_path)
    assert session.tools >= DEMO_TOOLS
    assert (session.server, session.version, session.cluster_name) == ("pve-steward", VERSION, "demo")
