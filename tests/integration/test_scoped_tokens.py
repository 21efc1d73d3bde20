"""Every check under scoped tokens (pvesim SCOPED_TOKENS, and the token the README recommends): nothing a
token merely cannot see is reported as missing, absent, uncovered or blocked (issue 41 item 4, 261206-55).

PVE lists only what a token may see (pve-storage API2/Storage/Config.pm index, pve-manager API2/Cluster.pm
resources and tasks, ...) or refuses a list whole (/cluster/backup, /cluster/ha/*). For each scenario the root
token's answers are the reference: a scoped token may find less, and may say what it cannot see (CHECK_SKIPPED,
DATA_INCOMPLETE, or a verdict "not visible to this token"), but no finding the root token does not also make.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

import pvesim
from pve_steward.server import build_server
from pvesim.server import SimServer
from tests.integration.conftest import sim_settings
from tests.untrusted import plain

pytestmark = pytest.mark.anyio

ROOT = "root@pam!pvesim"
README = "monitor@pve!mcp"  # PVEAuditor + BackupLister on /: what the README recommends
SCOPED = [
    "vmonly@pve!mcp",
    "somestorage@pve!mcp",
    "noroot@pve!mcp",
    "hiddenguest@pve!mcp",
    "hiddennode@pve!mcp",
    "team@pve!mcp",
]
# (scenario, PVE version, the node whose evacuation is planned)
SCENARIOS = [("demo", None, "pve1"), ("migration", "8.4.14", "m1"), ("upgrade", None, "pve1"), ("truth", None, "pve1")]
NOT_VISIBLE = "not visible to this token"
LIMITED = {"CHECK_SKIPPED", "DATA_INCOMPLETE"}

Key = tuple[str, str, str]  # code, subject kind, subject id


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimServer]]:
    started: dict[str, SimServer] = {}
    for name, version, _node in SCENARIOS:
        data = {**pvesim.load_scenario(name), "scoped_tokens": True}
        started[name] = SimServer(pvesim.build_cluster(data, version=version, speed=500.0)).start()
    yield started
    for sim in started.values():
        sim.stop()


def _server(sim: SimServer, token: str, where: Path) -> Any:
    return build_server(sim_settings(sim, token, where))


async def _answers(sim: SimServer, token: str, node: str) -> dict[str, dict[str, Any]]:
    """What each check says to ``token``: the health check, migratability, backups, capacity, the upgrade
    checks and an evacuation plan, every finding listed."""
    calls = {
        "health": ("check_cluster_health", {"detail": True, "limit": 1000}),
        "migratability": ("diagnose_migratability", {"detail": True, "limit": 1000}),
        "backups": ("diagnose_backups", {"detail": True, "limit": 1000}),
        "capacity": ("diagnose_capacity", {"detail": True, "limit": 1000}),
        "upgrade": ("check_upgrade_readiness", {"detail": True, "limit": 1000}),
        "plan": ("plan_node_evacuation", {"node": node, "limit": 1000}),
    }
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with Client(_server(sim, token, Path(tmp))) as c:
            for name, (tool, args) in calls.items():
                result = await c.call_tool(tool, args)
                assert result.is_error is False, f"{token} {tool}: {result.content[0].text}"
                answer = plain(result.structured_content)
                out[name] = answer.get("report", answer)  # the upgrade checks wrap a report
    return out


def _findings(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Findings, and a plan's blockers as findings of their guest."""
    found = list(answer.get("findings", []))
    found += [
        {"code": b["code"], "subject": {"kind": "guest", "id": str(b["vmid"])}, "message": b["detail"]}
        for b in answer.get("blockers", [])
    ]
    return found


def _key(f: dict[str, Any]) -> Key:
    return (f["code"], f["subject"]["kind"], str(f["subject"]["id"]))


_reference: dict[str, dict[str, dict[str, Any]]] = {}


async def _root(sims: dict[str, SimServer], scenario: str, node: str) -> dict[str, dict[str, Any]]:
    if scenario not in _reference:
        _reference[scenario] = await _answers(sims[scenario], ROOT, node)
    return _reference[scenario]


def _extra(scoped: dict[str, dict[str, Any]], root: dict[str, dict[str, Any]]) -> list[str]:
    """Findings of the scoped token that the root token does not make and that say nothing of visibility."""
    out = []
    for check, answer in scoped.items():
        reference = {_key(f) for f in _findings(root[check])}
        for f in _findings(answer):
            if _key(f) in reference or f["code"] in LIMITED or NOT_VISIBLE in str(f["message"]):
                continue
            out.append(f"{check}: {_key(f)} {f['message']}")
    return out


def _said(answers: dict[str, dict[str, Any]]) -> str:
    return "\n".join(str(f["message"]) for a in answers.values() for f in _findings(a))


@pytest.mark.parametrize(("scenario", "version", "node"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
@pytest.mark.parametrize("token", [README, *SCOPED])
async def test_a_scoped_token_reports_nothing_the_root_token_does_not(
    sims: dict[str, SimServer], scenario: str, version: str | None, node: str, token: str
) -> None:
    root = await _root(sims, scenario, node)
    scoped = await _answers(sims[scenario], token, node)
    assert _extra(scoped, root) == []
    if token != README:  # the token is scoped: it says what it cannot see, and which privilege would show it
        assert NOT_VISIBLE in _said(scoped)


async def test_what_each_scoped_token_cannot_see_is_named_with_the_privilege(sims: dict[str, SimServer]) -> None:
    """The demo's planted problems a scoped token cannot see come back as 'not visible', never as the false
    findings of before: 'storage does not exist' blockers, BACKUP_NONE / BACKUP_NOT_SCHEDULED for every guest,
    STORAGE_BACKUP_TARGET_MISSING on every node, a quiet TASKS_RUNNING_MANY."""
    sim = sims["demo"]
    some = await _answers(sim, "somestorage@pve!mcp", "pve1")
    said = _said(some)
    assert "storage ceph-vm is not visible" in said or "storage ceph-vm: not visible" in said
    assert "Datastore.Audit or Datastore.AllocateSpace on /storage/ceph-vm" in said
    codes = {f["code"] for a in some.values() for f in _findings(a)}
    assert not codes & {"BACKUP_NONE", "STORAGE_BACKUP_TARGET_MISSING", "MIGRATE_STORAGE_UNAVAILABLE"}
    assert "does not exist" not in said
    unprovable = [f for a in some.values() for f in a.get("findings", []) if f["code"] == "MIGRATE_NOT_PROVABLE"]
    assert unprovable and all("grant the privilege it names" in f["remediation"] for f in unprovable)

    noroot = await _answers(sim, "noroot@pve!mcp", "pve1")
    said = _said(noroot)
    assert "backup jobs: not visible to this token: PVE lists them only with Sys.Audit on / (/cluster/backup)" in said
    assert "cluster tasks: not visible to this token" in said  # TASKS_RUNNING_MANY cannot pass as clean
    assert "HA resources, groups, rules and status: not visible to this token" in said
    assert "BACKUP_NOT_SCHEDULED" not in {f["code"] for a in noroot.values() for f in _findings(a)}
    # whether a guest is HA-managed decides how it moves: with HA hidden no move is planned as a plain one
    assert noroot["plan"]["steps"] == [] and noroot["plan"]["complete"] is False

    hidden = await _answers(sim, "hiddenguest@pve!mcp", "pve1")
    assert "guest 101: not visible to this token: PVE lists it only with VM.Audit on /vms/101" in _said(hidden)
    assert 101 not in {s["vmid"] for s in hidden["plan"]["steps"]}
    assert hidden["plan"]["complete"] is False  # a guest on the node may be hidden: the plan says it is partial

    # PVEAuditor lacks Sys.Syslog and Sys.Modify: only the others' log entries and the pending updates hide
    readme = await _answers(sim, README, "pve1")
    hidden_from_readme = [line for line in _said(readme).splitlines() if NOT_VISIBLE in line]
    assert hidden_from_readme and all(
        line.startswith(("skipped cluster log", "skipped updates of")) for line in hidden_from_readme
    )
    assert readme["plan"]["complete"] is True


async def test_a_node_read_pve_refuses_is_a_skipped_check_naming_its_privilege(sims: dict[str, SimServer]) -> None:
    """PVE refuses a node's status, disks, ZFS pools and repositories without Sys.Audit where each method's
    `permissions` asks for it (pve-manager API2/Nodes.pm, Disks/List.pm, Disks/ZFS.pm, APT.pm): each is said
    as not visible to this token with that privilege (CHECK_SKIPPED), never as a failed read. The disks' check
    is an "or", so PVE's own 403 names neither a path nor a privilege."""
    expected = {
        "vmonly@pve!mcp": {
            "node status of pve1": "Sys.Audit on /nodes/pve1",
            "disks of pve1": "Sys.Audit on / or on /nodes/pve1",
            "zfs of pve1": "Sys.Audit on /",
            "repositories of pve1": "Sys.Audit on /nodes/pve1",
        },
        "noroot@pve!mcp": {"zfs of pve1": "Sys.Audit on /"},  # auditor on /nodes: only ZFS asks for / itself
    }
    for token, refused in expected.items():
        with tempfile.TemporaryDirectory() as tmp:
            async with Client(_server(sims["demo"], token, Path(tmp))) as c:
                result = await c.call_tool("check_cluster_health", {"detail": True, "limit": 1000})
        findings = plain(result.structured_content)["findings"]
        denied = [f for f in findings if f["evidence"].get("status") == 403 and f["subject"]["kind"] == "data"]
        assert all(f["code"] == "CHECK_SKIPPED" for f in denied), [f["message"] for f in denied]
        said = "\n".join(f["message"] for f in denied)
        for what, privilege in refused.items():
            assert f"{what} (not visible to this token: PVE answers it only with {privilege})" in said, (token, said)


async def test_a_guest_list_pve_shortens_for_a_token_says_so(sims: dict[str, SimServer]) -> None:
    """pve-manager API2/Cluster.pm resources lists a guest only with VM.Audit on it and says nothing of the
    others: list_guests' total then counts only what the token sees, and the answer says the list is partial
    and which privilege shows the rest, never that the cluster has fewer guests. A token that sees every guest
    gets no such line."""

    async def listed(token: str) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            async with Client(_server(sims["demo"], token, Path(tmp))) as c:
                result = await c.call_tool("list_guests", {"limit": 500})
        assert result.is_error is False, result.content[0].text
        return plain(result.structured_content)

    everything, hidden = await listed(ROOT), await listed("hiddenguest@pve!mcp")
    assert everything["incomplete"] == [] and (await listed(README))["incomplete"] == []
    assert {g["vmid"] for g in everything["items"]} - {g["vmid"] for g in hidden["items"]} == {101}
    assert hidden["page"]["total"] == everything["page"]["total"] - 1
    assert hidden["incomplete"] == [
        "guests: partial list: not all visible to this token: PVE lists each only with VM.Audit on /vms/<id> "
        "(/cluster/resources)"
    ]
    # VM.Audit on /vms, but no Sys.Audit on /access: a NoAccess on one guest would show only in the ACL tree
    assert (await listed("vmonly@pve!mcp"))["incomplete"] == [
        "guests: may be a partial list: PVE lists each only with VM.Audit on /vms/<id>; cannot tell: a NoAccess ACL "
        "entry on one object shows only in /access/acl, which needs Sys.Audit on /access"
    ]


async def test_a_token_scoped_to_a_pool_lists_the_pools_guests_as_a_partial_list(start_sim: Any) -> None:
    """PVEAuditor on /pool/prod alone, as admins scope a team's token: PVE grants it the pool's guests
    (RPCEnvironment.pm compile_acl_path), the list holds them and says the rest are not visible to it."""
    data = pvesim.load_scenario("truth")
    on_pool = [{"path": "/pool/prod", "role": "PVEAuditor"}]
    data["tokens"] = [*pvesim.scenario.DEFAULT_TOKENS, {"id": "team@pve!mcp", "user_acl": on_pool, "acl": on_pool}]
    sim = start_sim(data)
    with tempfile.TemporaryDirectory() as tmp:
        async with Client(_server(sim, "team@pve!mcp", Path(tmp))) as c:
            result = await c.call_tool("list_guests", {})
    answer = plain(result.structured_content)
    assert [g["vmid"] for g in answer["items"]] == [200, 201] and answer["page"]["total"] == 2
    assert answer["incomplete"][0].startswith("guests: partial list: not all visible to this token")
