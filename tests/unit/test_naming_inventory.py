"""How texts name operations per registration mode, the inventory cache's lifetime, and the code table's fixes."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.codes import CODES
from pve_steward.errors import PveUnavailable
from pve_steward.pveio.inventory import InventoryCache
from pve_steward.security.tiers import Tier
from pve_steward.surface.completions import MAX_VALUES, complete_values
from pve_steward.surface.naming import Naming
from pve_steward.surface.registry import load_registry
from pve_steward.testing import FakeClient

REGISTRY = load_registry()


def naming(granular: bool, tier: Tier = Tier.OPERATOR, **extra: Any) -> Naming:
    ops = REGISTRY.select(tier=tier, read_only=extra.get("read_only", False), toolsets=extra.get("toolsets"))
    return Naming.build(
        REGISTRY,
        ops,
        granular=granular,
        tier=tier.value,
        read_only=extra.get("read_only", False),
        toolsets=extra.get("toolsets"),
    )


def test_granular_names_are_the_operation_names() -> None:
    n = naming(granular=True)
    assert n.call("get_task") == "get_task" and n.call("guest_start") == "guest_start"
    assert n.text("Read the task log (get_task).") == "Read the task log (get_task)."


def test_meta_names_are_tool_and_action() -> None:
    n = naming(granular=False)
    assert n.call("get_task") == "tasks with action=get_task"
    assert n.call("guest_start") == "operate with action=guest_start"
    assert n.text("Read the task log (get_task); see get_guest.") == (
        "Read the task log (tasks with action=get_task); see guests with action=get_guest."
    )
    # already written as a call, or part of a longer word: left alone
    assert n.text("call tasks with action=get_task") == "call tasks with action=get_task"
    assert n.text("my_get_task_helper") == "my_get_task_helper"


def test_a_missing_operation_says_which_tier_or_setting_has_it() -> None:
    assert naming(granular=False).call("guest_unlock") == (
        "guest_unlock (not available here: it needs tier admin, in tool administer, and this server runs at "
        "tier operator, see --tier)"
    )
    assert "this server runs read-only" in naming(granular=True, tier=Tier.ADMIN, read_only=True).call("guest_stop")
    assert "toolset tasks is not enabled" in naming(granular=True, toolsets=["guests"]).call("get_task")
    assert naming(granular=False).missing["administer"].startswith("it holds the admin-tier writes")
    assert naming(granular=False, tier=Tier.ADMIN).call("guest_unlock") == "administer with action=guest_unlock"


def test_the_default_naming_changes_nothing() -> None:
    assert Naming().call("get_task") == "get_task" and Naming().text("see get_task") == "see get_task"


@pytest.mark.anyio
async def test_inventory_is_read_once_per_ttl_and_failures_are_not_kept() -> None:
    now = [100.0]
    client = FakeClient().on("GET", "/nodes", [{"node": "pve2"}, {"node": "pve1"}, {"status": "no name"}])
    cache = InventoryCache(ttl=5.0, clock=lambda: now[0])
    assert await cache.nodes(client) == ["pve1", "pve2"]
    now[0] += 4.9
    assert await cache.nodes(client) == ["pve1", "pve2"]
    assert client.requested("GET") == ["GET /nodes"]
    now[0] += 0.2
    client.on("GET", "/nodes", [{"node": "pve3"}])
    assert await cache.nodes(client) == ["pve3"]
    assert client.requested("GET") == ["GET /nodes", "GET /nodes"]
    broken = FakeClient().on("GET", "/cluster/backup", PveUnavailable("down", path="/cluster/backup"))
    with pytest.raises(PveUnavailable):
        await cache.backup_jobs(broken)
    broken.on("GET", "/cluster/backup", [{"id": "nightly"}])
    assert await cache.backup_jobs(broken) == ["nightly"]


@pytest.mark.anyio
async def test_snapshots_are_read_from_the_guests_node() -> None:
    client = FakeClient().on("GET", "/cluster/resources", [{"type": "lxc", "vmid": 200, "node": "pve2", "name": "ct"}])
    client.on("GET", "/nodes/pve2/lxc/200/snapshot", [{"name": "current"}, {"name": "b4"}, {"name": "a1"}])
    cache = InventoryCache()
    assert await cache.snapshots(client, 200) == ["a1", "b4"]
    assert await cache.snapshots(client, 999) == []


def test_completion_values_are_filtered_and_capped() -> None:
    names = [f"vm{i:03d}" for i in range(250)]
    every = complete_values(names, "")
    assert len(every.values) == MAX_VALUES and every.total == 250 and every.has_more is True
    some = complete_values(names, "VM24")
    assert some.values == [f"vm24{i}" for i in range(10)] and some.has_more is False


def test_every_code_has_a_fix() -> None:
    assert [c for c, info in CODES.items() if not info.remediation.strip()] == []
    assert "guest_unlock" in CODES["GUEST_LOCK_STUCK"].remediation
