"""Prompts are built once per process for the same words and shared by the servers that offer them; other words
(meta or granular names, what is missing at this tier, several clusters) build their own (surface/prompts.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.registered import registered_server


def _prompt(mcp: Any, name: str) -> Any:
    return mcp._prompt_manager.get_prompt(name)


def _text(mcp: Any, name: str, args: dict[str, str] | None = None) -> str:
    return str(_prompt(mcp, name).fn(**(args or {})))


def test_two_servers_of_one_configuration_share_each_prompt(tmp_path: Path) -> None:
    first, second = registered_server(tmp_path), registered_server(tmp_path)
    names = {p.name for p in first._prompt_manager.list_prompts()}
    assert {"health_review", "maintenance_preparation", "guest_review"} <= names
    assert all(_prompt(first, name) is _prompt(second, name) for name in names)
    assert _text(second, "maintenance_preparation", {"node": "pve1"}).startswith("Prepare node pve1")


def test_other_words_build_their_own_prompts(tmp_path: Path) -> None:
    meta, granular = registered_server(tmp_path), registered_server(tmp_path, granular_tools=True)
    assert _prompt(meta, "health_review") is not _prompt(granular, "health_review")
    assert "cluster with action=cluster_overview" in _text(meta, "health_review")
    assert "Call cluster_overview, then check_cluster_health" in _text(granular, "health_review")
    auditor = registered_server(tmp_path, tier="read_only", granular_tools=True)
    assert _prompt(auditor, "storage_review") is not _prompt(granular, "storage_review")
    several = registered_server(
        tmp_path,
        clusters={
            "a": {"url": "https://a:8006", "token_id": "ops@pve!mcp", "token_secret": "s" * 36},
            "b": {"url": "https://b:8006", "token_id": "ops@pve!mcp", "token_secret": "s" * 36},
        },
    )
    assert "cluster" in {a.name for a in _prompt(several, "health_review").arguments or []}
    assert not _prompt(meta, "health_review").arguments
