"""``server.json`` for the MCP Registry: valid against the registry's published schema, and true.

The schema is the registry's (``$schema`` in server.json names it); it is read from the shared data
beside the checkout (``shared/mcp-registry/server.schema.json``), where this project keeps third-party
reference data. The other tests check what a schema cannot: that every variable is a real setting,
secrets are marked, versions and names agree with pyproject, the image label and the README marker
the registry looks for on PyPI.
"""

from __future__ import annotations

import json
import re
import typing
import zipfile
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from pydantic import SecretStr

from pve_steward.config import ENV_PREFIX, Settings
from tests.packaging.conftest import PROJECT, ROOT, VERSION

SERVER = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
SCHEMA_FILE = ROOT.parent / "shared" / "mcp-registry" / "server.schema.json"
NAME_RE = re.compile(r"^io\.github\.(?P<owner>[A-Za-z0-9-]+)/(?P<repo>[A-Za-z0-9._-]+)$")


def secret_settings() -> set[str]:
    return {
        ENV_PREFIX + name.upper()
        for name, field in Settings.model_fields.items()
        if SecretStr in (field.annotation, *typing.get_args(field.annotation))
    }


def env_vars(package: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in package.get("environmentVariables", [])}


@pytest.mark.skipif(
    not SCHEMA_FILE.exists(),
    reason=f"the MCP Registry schema is not on this machine: save {SERVER['$schema']} as {SCHEMA_FILE}",
)
def test_server_json_is_valid_against_the_registry_schema() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["$id"] == SERVER["$schema"], "server.json names another schema version than the one checked"
    validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(SERVER)]
    assert problems == []


def test_server_json_agrees_with_the_package() -> None:
    assert SERVER["version"] == VERSION
    assert len(SERVER["description"]) <= 100  # the registry's limit
    match = NAME_RE.fullmatch(SERVER["name"])
    assert match and match["repo"] == PROJECT["name"]
    assert SERVER["repository"]["url"] == f"https://github.com/{match['owner']}/{PROJECT['name']}"
    packages = {p["registryType"]: p for p in SERVER["packages"]}
    assert set(packages) == {"pypi", "oci"}
    assert (packages["pypi"]["identifier"], packages["pypi"]["version"]) == (PROJECT["name"], VERSION)
    assert packages["oci"]["identifier"] == f"ghcr.io/{match['owner']}/{PROJECT['name']}:{VERSION}"
    assert all(p["transport"] == {"type": "stdio"} for p in SERVER["packages"])


def test_every_variable_is_a_real_setting_and_secrets_are_marked() -> None:
    settings = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    secrets = secret_settings()
    assert f"{ENV_PREFIX}TOKEN_SECRET" in secrets
    for package in SERVER["packages"]:
        described = env_vars(package)
        assert set(described) <= settings, f"{package['registryType']}: not settings: {set(described) - settings}"
        assert {f"{ENV_PREFIX}URL", f"{ENV_PREFIX}TOKEN_ID", f"{ENV_PREFIX}TOKEN_SECRET"} <= set(described)
        for name, var in described.items():
            assert var.get("isSecret", False) == (name in secrets), f"{name}: isSecret must be {name in secrets}"
            assert var.get("description"), f"{name} has no description"
        assert described[f"{ENV_PREFIX}URL"]["isRequired"] and described[f"{ENV_PREFIX}TOKEN_ID"]["isRequired"]
        # every way to run it says which writes it registers: the image too (read_only by default)
        tier = described[f"{ENV_PREFIX}TIER"]
        assert tier["default"] == "read_only" and tier["choices"] == ["read_only", "operator", "admin"]


def test_readme_and_wheel_carry_the_mcp_name_marker(wheel: Path) -> None:
    """The registry proves PyPI ownership by finding ``mcp-name: <name>`` in the package's description."""
    marker = f"mcp-name: {SERVER['name']}"
    assert marker in (ROOT / "README.md").read_text(encoding="utf-8")
    with zipfile.ZipFile(wheel) as built:
        metadata = built.read(f"pve_steward-{VERSION}.dist-info/METADATA").decode()
    assert marker in metadata
