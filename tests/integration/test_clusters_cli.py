"""Several clusters from the command line: serve with [clusters.NAME] tables, check --cluster, demo --clusters 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.integration.test_cli import STEWARD, clean_env, endpoint, run, started

pytestmark = pytest.mark.anyio


def config(tmp_path: Path, sims: dict[str, SimServer], token: str = "auditor@pve!mcp", extra: str = "") -> Path:
    lines = [extra]
    for name, sim in sims.items():
        token_id, secret = sim.token(token)
        secret_file = tmp_path / f"{name}.token"
        secret_file.write_text(secret + "\n")
        secret_file.chmod(0o600)
        lines += [
            f"[clusters.{name}]",
            f'url = "{sim.address}"',
            f'token_id = "{token_id}"',
            f'token_secret_file = "{secret_file}"',
            f'fingerprint = "{sim.fingerprint}"',
        ]
    path = tmp_path / "steward.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def structured(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return result.structured_content["result"]


async def test_serve_names_every_cluster_and_answers_for_each(
    start_sim: Callable[..., SimServer], tmp_path: Path
) -> None:
    a, b = start_sim("demo"), start_sim("healthy")
    path = config(tmp_path, {"prod": a, "lab": b}, extra='retries = 0\naudit_log = "' + str(tmp_path / "a.jsonl") + '"')
    cmd = [*STEWARD, "serve", "--config", str(path), "--transport", "http", "--http-port", "0"]
    with started(cmd, clean_env(tmp_path)) as lines:
        async with Client(endpoint(lines)) as c:
            listed = structured(await c.call_tool("cluster", {"action": "list_clusters"}))
            guests = structured(await c.call_tool("guests", {"action": "list_guests", "cluster": "lab"}))
    banner = "\n".join(lines)
    assert f"clusters: prod ({a.address} as auditor@pve!mcp, up to read_only), lab ({b.address}" in banner
    assert [row["name"] for row in listed["clusters"]] == ["prod", "lab"]
    assert guests["page"]["total"] == 4  # the healthy scenario's guests, not the demo's


def test_check_runs_against_the_cluster_it_names(start_sim: Callable[..., SimServer], tmp_path: Path) -> None:
    a, b = start_sim("demo"), start_sim("healthy")
    path = config(tmp_path, {"prod": a, "lab": b})
    lab = run(["check", "--config", str(path), "--cluster", "lab", "--areas", "cluster"], clean_env(tmp_path))
    first = run(["check", "--config", str(path), "--areas", "cluster"], clean_env(tmp_path))
    unknown = run(["check", "--config", str(path), "--cluster", "qa"], clean_env(tmp_path))
    assert "cluster:     healthy (3 nodes)" in lab.stdout, lab.stderr
    assert "cluster:     demo (" in first.stdout, first.stderr
    assert unknown.returncode == 64 and "no cluster 'qa'; clusters are: prod, lab" in unknown.stderr


def test_a_bad_cluster_table_stops_serve_with_one_sentence(start_sim: Callable[..., SimServer], tmp_path: Path) -> None:
    path = config(tmp_path, {"prod": start_sim("healthy")})
    path.write_text(path.read_text().replace(str(tmp_path / "prod.token"), str(tmp_path / "missing.token")))
    done = run(["serve", "--config", str(path)], clean_env(tmp_path))
    assert done.returncode == 64
    assert f"clusters.prod (config file {path}): token_secret_file {tmp_path / 'missing.token'} does not exist" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr


async def test_demo_with_two_clusters(tmp_path: Path) -> None:
    cmd = [*STEWARD, "demo", "--clusters", "2", "--http-port", "0", "--state-dir", str(tmp_path / "demo")]
    with started(cmd, clean_env(tmp_path)) as lines:
        async with Client(endpoint(lines)) as c:
            listed = structured(await c.call_tool("cluster", {"action": "list_clusters"}))
            demo = structured(await c.call_tool("cluster", {"action": "list_nodes", "cluster": "demo"}))
            healthy = structured(await c.call_tool("cluster", {"action": "list_nodes", "cluster": "healthy"}))
    banner = "\n".join(lines)
    assert "every tool takes cluster=demo or healthy" in banner
    assert [(row["name"], row["reachable"]) for row in listed["clusters"]] == [("demo", True), ("healthy", True)]
    assert "pve1" in json.dumps(demo) and "hv1" in json.dumps(healthy) and "pve1" not in json.dumps(healthy)


def test_demo_refuses_a_config_files_cluster_tables(start_sim: Callable[..., SimServer], tmp_path: Path) -> None:
    path = config(tmp_path, {"prod": start_sim("healthy")})
    done = run(["demo", "--config", str(path), "--state-dir", str(tmp_path / "demo")], clean_env(tmp_path))
    assert done.returncode == 64
    assert "the [clusters.*] tables of the config file are not used by the demo" in done.stderr
