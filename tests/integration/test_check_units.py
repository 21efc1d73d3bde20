"""A check's declared reads through the real server and pvesim: a per-node Need is read once per online node,
its answers reach the check, and a token without the privilege gets CHECK_SKIPPED naming it (design record
261203-14)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from mcp import Client

from pve_steward.analysis.catalog import Code, Need, check
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Subject, finding
from pvesim.server import SimServer
from tests.checkscratch import scratch_catalog
from tests.integration.pve import api
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

# GET /nodes/{node}/apt/update needs Sys.Modify on the node (apidoc); the auditor token has Sys.Audit only.
# The replication area reads nothing else there, so every request to it comes from this declaration.
APT = Need("test_apt_updates", "/nodes/{node}/apt/update", per="node", privilege="Sys.Modify on /nodes/{node}")


def _updates_seen(data: ClusterData, t: Any) -> list[Finding]:
    return [
        finding("TEST_APT_SEEN", Subject(kind="node", id=node), f"{node} answered", {"packages": len(rows)})
        for node, rows in sorted(data.read_nodes(APT.key).items())
    ]


@contextmanager
def apt_check() -> Iterator[None]:
    """A test-only check in the replication area standing on the per-node read; gone afterwards."""
    with scratch_catalog():
        code = Code("TEST_APT_SEEN", "info", "Node answered", "Test only.", "Nothing.")
        check("replication", codes=[code], needs=[APT])(_updates_seen)
        yield


async def _replication(mcp: Any) -> dict[str, Any]:
    async with Client(mcp) as c:
        result = await c.call_tool("diagnose_replication", {"detail": True})
    assert not result.is_error, result.content
    report: dict[str, Any] = plain(result.structured_content)
    return report


def _online(sim: SimServer) -> list[str]:
    return sorted(n["node"] for n in api(sim).nodes.get() if n.get("status") == "online")


async def test_a_per_node_need_is_read_once_per_online_node(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    online = _online(sim)
    assert len(online) >= 2
    mcp = server_for(sim, "root@pam!pvesim")
    await _replication(mcp)  # first use: the version check
    before = sim.sim.requests
    without = await _replication(mcp)
    plain_reads = sim.sim.requests - before
    with apt_check():
        before = sim.sim.requests
        report = await _replication(mcp)
        with_need = sim.sim.requests - before
    assert with_need - plain_reads == len(online)
    seen = {f["subject"]["id"]: f["evidence"] for f in report["findings"] if f["code"] == "TEST_APT_SEEN"}
    assert sorted(seen) == online
    for node, evidence in seen.items():
        assert evidence == {"packages": len(api(sim).nodes(node).apt.update.get())}
    assert not any(f["code"] == "TEST_APT_SEEN" for f in without["findings"])
    after = await _replication(mcp)  # the test-only check is gone again
    assert not any(f["code"] == "TEST_APT_SEEN" for f in after["findings"])


async def test_a_denied_need_is_check_skipped_naming_the_privilege(start_sim: Any, server_for: Any) -> None:
    sim = start_sim("demo")
    online = _online(sim)
    with apt_check():
        report = await _replication(server_for(sim, "auditor@pve!mcp"))
    denied = sorted(path for status, _method, path in sim.sim.failure_log if path.endswith("/apt/update"))
    assert denied == [f"/nodes/{n}/apt/update" for n in online]  # one request per node, each refused
    assert {s for s, _m, p in sim.sim.failure_log if p.endswith("/apt/update")} == {403}
    skipped = {f["subject"]["node"]: f for f in report["findings"] if f["code"] == "CHECK_SKIPPED"}
    assert sorted(skipped) == online
    for node, f in skipped.items():
        assert f"needs Sys.Modify on /nodes/{node}" in f["message"], f
        assert f["subject"]["id"] == f"/nodes/{node}/apt/update" and f["evidence"]["status"] == 403
        assert f["evidence"]["affects"] == ["replication"]
    assert not any(f["code"] in ("TEST_APT_SEEN", "DATA_INCOMPLETE") for f in report["findings"])
