"""The README's first commands and client configs stay true to the package they configure."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from pve_steward.config import ENV_PREFIX, Settings
from tests.packaging.conftest import PROJECT, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
TOP = README[: README.index("## Tool modes")]


def json_blocks() -> list[Any]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", TOP, re.DOTALL)]


def server_configs(node: Any) -> Iterator[dict[str, Any]]:
    """Every MCP server entry (``mcpServers``/``servers`` values) in a parsed config."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("mcpServers", "servers") and isinstance(value, dict):
                yield from value.values()
            else:
                yield from server_configs(value)


def test_make_demo_and_make_test_come_first() -> None:
    commands = re.findall(r"^(make \w+)", TOP.split("```bash\n", 1)[1], re.MULTILINE)
    assert commands[:2] == ["make demo", "make test"]


def test_client_configs_run_the_installed_command_with_real_settings() -> None:
    settings = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    script = next(iter(PROJECT["scripts"]))
    configs = [c for block in json_blocks() for c in server_configs(block)]
    stdio = [c for c in configs if "command" in c]
    http = [c for c in configs if "url" in c]
    assert len(stdio) >= 3 and len(http) >= 2, "Claude Desktop, VS Code and Cursor, over stdio and HTTP"
    for config in stdio:
        assert config["command"] == "uvx" and config["args"][0] == script
        assert set(config["env"]) <= settings, set(config["env"]) - settings
    for config in http:
        assert config["url"].endswith("/mcp") and config["headers"]["Authorization"].startswith("Bearer ")
    assert f"-- uvx {script}" in TOP, "Claude Code's `claude mcp add ... -- uvx pve-steward`"


def released() -> bool:
    """Whether CHANGELOG.md dates a release of this version (the release workflow publishes it to PyPI)."""
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = re.escape(PROJECT["version"])
    return re.search(rf"^## \[{version}\] - \d{{4}}-\d\d-\d\d", changelog, re.MULTILINE) is not None


def test_until_the_first_release_the_readme_says_so_and_installs_from_a_checkout_first() -> None:
    """`uvx pve-steward` names a PyPI project: until we have published it, whoever registers the name first
    runs code on every machine that copies the README. It says so where it first shows the command."""
    install = TOP[TOP.index("## Install") :]
    install = install[: install.index("\n## ", 3)]
    first_uvx = install.index("uvx pve-steward")
    if released():
        assert "not on PyPI yet" not in README, "the release is out: drop the note and put PyPI first"
        return
    assert "**pve-steward is not on PyPI yet**" in install[:first_uvx]
    first_block = install.split("```bash\n", 1)[1].split("```", 1)[0]
    wheel = f"dist/pve_steward-{PROJECT['version']}-py3-none-any.whl"
    assert first_block.splitlines()[0].startswith("make dist") and f"--from {wheel} pve-steward" in first_block
    configs = README[README.index("## Client configuration") :]
    assert "Until the first release is on PyPI" in configs[: configs.index("```")]
