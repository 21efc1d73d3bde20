"""Lists PVE filters by privilege (Need.visible_with): the collector asks /access/permissions once and skips a
list the token would see only part of, as CHECK_SKIPPED naming the privilege (FakeClient, PVE-shaped)."""

from __future__ import annotations

from typing import Any

import pytest

from pve_steward.analysis.checks.access import root_tfa
from pve_steward.analysis.data import incomplete_findings
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.errors import PveUnavailable
from pve_steward.testing import FakeClient
from pve_steward.tools.collect import collect
from tests.unit.pve_fixtures import NOW, cluster_status, node_row

pytestmark = pytest.mark.anyio

AUDITOR = {"/": {"Sys.Audit": 1}, "/access": {"Sys.Audit": 1}, "/access/groups": {"Sys.Audit": 1}}
VMS_ONLY = {"/vms": {"VM.Audit": 1}}
ROOT_NO_TFA = [{"userid": "root@pam", "enable": 1, "expire": 0, "realm-type": "pam", "email": "root@example.com"}]


def _cluster(permissions: Any) -> FakeClient:
    fake = FakeClient()
    fake.on("GET", "/version", {"version": "9.1.2", "release": "9.1"})
    fake.on("GET", "/cluster/status", cluster_status({"pve1": True}))
    fake.on("GET", "/cluster/resources", [node_row("pve1")])
    fake.on("GET", "/storage", [])
    fake.on("GET", "/access/permissions", permissions)
    fake.on("GET", "/access/users", ROOT_NO_TFA)
    fake.on("GET", "/access/tfa", [])
    fake.on("GET", "/access/acl", [])
    fake.on("GET", "/access/groups", [])
    fake.on("GET", "/access/roles", [])
    fake.on("GET", "/access/domains", [{"realm": "pam", "type": "pam"}])
    fake.on("GET", "/pools", [])
    return fake


async def test_a_token_that_sees_the_whole_list_reads_it() -> None:
    fake = _cluster(AUDITOR)
    d = await collect(fake, NOW, ["access"])
    asked = fake.requested("GET")
    assert asked.count("GET /access/permissions") == 1 and "GET /access/users" in asked
    assert ("GET", "/access/users", {"full": 1}) in fake.calls
    assert [f.code for f in root_tfa(d, Thresholds())] == ["ACCESS_ROOT_NO_TFA"]
    assert [m.path for m in d.missing_for("access")] == ["/pools"]  # no Pool.Audit on /pool in AUDITOR: skipped


async def test_a_token_that_would_see_part_of_a_list_is_skipped_naming_the_privilege() -> None:
    fake = _cluster(VMS_ONLY)
    d = await collect(fake, NOW, ["access"])
    asked = fake.requested("GET")
    assert "GET /access/users" not in asked and "GET /access/roles" in asked
    assert d.read("access_acl") is None  # PVE answers /access/acl with part of it: read for the privileges alone
    gaps = {f.subject.id: f for f in incomplete_findings(d, "access")}
    assert gaps["/access/users"].code == "CHECK_SKIPPED"
    assert "Sys.Audit or User.Modify on /access/groups" in gaps["/access/users"].message
    assert root_tfa(d, Thresholds()) == []  # no verdict on a list it did not read


async def test_unreadable_own_privileges_are_a_gap_not_a_pass() -> None:
    fake = _cluster(PveUnavailable("GET /access/permissions: timed out", path="/access/permissions"))
    d = await collect(fake, NOW, ["access"])
    gaps = {f.subject.id: f.code for f in incomplete_findings(d, "access")}
    assert gaps and set(gaps.values()) == {"DATA_INCOMPLETE"} and "GET /access/users" not in fake.requested()
