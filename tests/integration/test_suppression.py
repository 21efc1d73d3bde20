"""Suppression end to end: a config file's [[suppress]] entries silence findings in every report, through a
real MCP client and through `pve-steward check`, listed and counted as suppressed, never dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pvesim.server import SimServer
from tests.integration.test_cli import check
from tests.untrusted import plain

MONITOR = "monitor@pve!mcp"  # the README's read-only token: PVE lists backups to it
pytestmark = pytest.mark.anyio

CONFIG = """
[[suppress]]
code = "BACKUP_STALE"
vmid = 104
reason = "mail01 is being retired"
expires = 2099-12-31

[[suppress]]
code = "BACKUP_STALE"
vmid = 107
reason = "expired long ago"
expires = 2020-01-01

[[suppress]]
code = "BACKUP_VERIFY_FAILED"
vmid = 999
reason = "a guest that no longer exists"
"""


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "steward.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


async def _call(mcp: Any, tool: str, **args: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool(tool, args)
    assert result.is_error is False, result.content[0].text
    return plain(result.structured_content)  # type: ignore[no-any-return]


async def test_suppressions_through_mcp(demo_sim: SimServer, server_for: Any, tmp_path: Path) -> None:
    from pve_steward.config import load_settings

    suppress = load_settings(_config(tmp_path)).suppress
    plain_report = await _call(server_for(demo_sim), "diagnose_backups", detail=True)
    report = await _call(server_for(demo_sim, suppress=suppress), "diagnose_backups", detail=True)
    stale = {f["subject"]["id"] for f in report["findings"] if f["code"] == "BACKUP_STALE"}
    assert "104" not in stale and "107" in stale  # 107's suppression expired: its finding is back
    [silenced] = report["suppressed"]
    assert (silenced["code"], silenced["subject"]["id"]) == ("BACKUP_STALE", "104")
    assert silenced["suppressed_by"]["reason"] == "mail01 is being retired"
    assert silenced["suppressed_by"]["expires"].startswith("2099-12-31T23:59:59")
    assert sum(report["suppressed_counts"].values()) == 1
    assert sum(report["counts"].values()) == sum(plain_report["counts"].values()) - 1
    assert [r["code"] for r in report["suppressions_expired"]] == ["BACKUP_STALE"]
    assert [(r["code"], r["target"]) for r in report["suppressions_unused"]] == [("BACKUP_VERIFY_FAILED", "vmid 999")]
    health = await _call(server_for(demo_sim, suppress=suppress), "check_cluster_health", areas=["backups"])
    assert [s["subject"]["id"] for s in health["suppressed"]] == ["104"]


def test_suppressions_through_check(demo_sim: SimServer, tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    text = check(demo_sim, tmp_path, "--areas", "backups", "--config", config, token=MONITOR)
    assert text.returncode == 2, text.stderr
    section = text.stdout.split("= SUPPRESSED =")[1].split("= SUMMARY =")[0]
    assert "SUPPRESSED: [BACKUP_STALE]" in section and "reason: mail01 is being retired" in section
    assert "EXPIRED: suppression of BACKUP_STALE for vmid 107" in section
    assert "UNUSED: suppression of BACKUP_VERIFY_FAILED for vmid 999 matched no finding" in section
    assert "SUPPRESSED: 1 (not counted above" in text.stdout.split("= SUMMARY =")[1]
    findings = text.stdout.split("= SUPPRESSED =")[0]
    assert "[BACKUP_STALE] " in findings and "mail01" not in findings
    backups = ("--areas", "backups", "--config", config)
    body = plain(json.loads(check(demo_sim, tmp_path, *backups, "--json", token=MONITOR).stdout))
    assert [s["subject"]["id"] for s in body["suppressed"]] == ["104"]
    assert body["suppressed_counts"]["warning"] + body["suppressed_counts"]["critical"] == 1
    md = check(demo_sim, tmp_path, *backups, "--format", "markdown", token=MONITOR).stdout
    assert (
        "### Suppressed" in md
        and "mail01 is being retired" in md
        and "unused: suppression of `BACKUP_VERIFY_FAILED`" in md
    )


def test_a_node_suppression_silences_it_while_the_gap_stays(start_sim: Any, tmp_path: Path) -> None:
    sim = start_sim("healthy")
    config = tmp_path / "node.toml"
    config.write_text('[[suppress]]\ncode = "NODE_OFFLINE"\nnode = "hv3"\nreason = "planned maintenance"\n')
    sim.cluster.nodes["hv3"].online = False
    offline = check(sim, tmp_path, "--areas", "cluster")
    silenced = check(sim, tmp_path, "--areas", "cluster", "--config", str(config))
    assert "[NODE_OFFLINE]" in offline.stdout and offline.returncode == 1
    findings, rest = silenced.stdout.split("= SUPPRESSED =")
    assert "[NODE_OFFLINE]" not in findings and "SUPPRESSED: [NODE_OFFLINE]" in rest
    assert "[DATA_INCOMPLETE]" in findings and silenced.returncode == 1  # what could not be read is still said


def test_an_invalid_suppression_stops_check_with_the_entry_named(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[[suppress]]\ncode = "BACKUP_STAEL"\nreason = "typo in the code"\n')
    done = check(
        None, tmp_path, "--config", str(config), "--url", "pve.lan", "--token-id", "ops@pve!mcp", "--token-secret", "s"
    )
    assert done.returncode == 64
    assert (
        "suppress entry 1 (code BACKUP_STAEL): field 'code': no finding has this code (did you mean BACKUP_STALE?)"
        in done.stderr
    )
    config.write_text('[[suppress]]\ncode = "BACKUP_STALE"\nreason = "x"\nuntil = 2027-01-01\n')
    done = check(None, tmp_path, "--config", str(config), "--json")
    assert done.returncode == 64
    message = json.loads(done.stdout)["error"]["message"]
    assert "suppress entry 1 (code BACKUP_STALE)" in message and "field 'until': unknown field" in message
