"""Identifiers are checked against PVE's formats before any request; paths contain nothing else."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pve_steward.client import api_path, ha_sid, node, replication_job, snapshot, storage, upid, vmid
from pve_steward.pve.ids import InvalidIdentifier, parse_upid

HOSTILE = [
    "../",
    "..",
    "%2e%2e",
    "pve1/../../access",
    "pve1/..",
    "pve1\x00",
    "pve1?x=1",
    "pve1#frag",
    "pvé1",
    "a" * 10_000,
    "",
    " pve1",
    "pve1 ",
    "-pve1",
    "pve1-",
    "pve1\n",
    "pve1;rm -rf /",
    "pve1\\..",
    "pve1%2F..",
    "/access/users",
    "pve1.example.com",
]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_node_names_are_refused_naming_the_parameter(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match=r"^invalid target "):
        node(bad, param="target")


@pytest.mark.parametrize("good", ["pve1", "PVE-node-07", "a", "n" * 63, "10-0-0-1"])
def test_valid_node_names(good: str) -> None:
    assert node(good).value == good


def test_node_name_length_limit() -> None:
    with pytest.raises(InvalidIdentifier):
        node("n" * 64)


@pytest.mark.parametrize("bad", [99, 0, -1, 1_000_000_000, True, False, "100", 100.0, None])
def test_vmid_bounds_and_types(bad: object) -> None:
    with pytest.raises(InvalidIdentifier, match="guest ids are integers from 100 to 999999999"):
        vmid(bad)  # type: ignore[arg-type]


def test_vmid_limits_are_inclusive() -> None:
    assert vmid(100).value == "100" and vmid(999_999_999).value == "999999999"


@pytest.mark.parametrize(
    ("fn", "bad"),
    [
        (storage, "1local"),
        (storage, "local/../x"),
        (storage, "local-"),
        (storage, "a"),
        (snapshot, "current"),
        (snapshot, "pending"),
        (snapshot, "1snap"),
        (snapshot, "pre-upgrade"),
        (snapshot, "x" * 41),
        (snapshot, "snap/../.."),
        (upid, "UPID:pve1"),
        (upid, "../../access"),
        (upid, "UPID:pve1:0000ABCD:0000ABCD:0000ABCD:qmstart:100/../x:root@pam:"),
        (ha_sid, "vm:99"),
        (ha_sid, "qemu:100"),
        (ha_sid, "vm:100/../x"),
        (replication_job, "100"),
        (replication_job, "100-0/x"),
    ],
)
def test_other_identifiers_refuse_malformed_values(fn, bad: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidIdentifier):
        fn(bad)


def test_paths_are_only_words_and_validated_segments() -> None:
    p = api_path("nodes", node("pve1"), "qemu", vmid(100), "snapshot", snapshot("pre_patch"), "rollback")
    assert str(p) == "/nodes/pve1/qemu/100/snapshot/pre_patch/rollback"
    assert str(p.join("config")).endswith("/rollback/config")
    with pytest.raises(ValueError, match="not a known API path word"):
        api_path("nodes", "pve1")  # caller input must be a typed segment
    with pytest.raises(ValueError, match="not a known API path word"):
        api_path("cluster", "../access")


def test_parse_upid() -> None:
    info = parse_upid("UPID:pve2:00004E21:0001D4C1:6B10377E:qmigrate:100:operator@pve!mcp:")
    assert (info.node, info.type, info.id, info.user) == ("pve2", "qmigrate", "100", "operator@pve!mcp")
    assert info.pid == 0x4E21 and info.starttime == 0x6B10377E


SAFE_NODE = re.compile(r"^[a-zA-Z0-9-]{1,63}$")


@given(st.text(max_size=200))
def test_any_text_accepted_as_node_is_a_plain_dns_label(text: str) -> None:
    try:
        seg = node(text)
    except InvalidIdentifier:
        return
    assert SAFE_NODE.match(seg.value) and not seg.value.startswith("-") and not seg.value.endswith("-")


@given(st.integers())
def test_any_integer_accepted_as_vmid_is_in_range(value: int) -> None:
    try:
        seg = vmid(value)
    except InvalidIdentifier:
        assert not 100 <= value <= 999_999_999
        return
    assert 100 <= int(seg.value) <= 999_999_999


@given(st.text(max_size=100))
def test_any_text_accepted_as_snapshot_cannot_escape(text: str) -> None:
    try:
        seg = snapshot(text)
    except InvalidIdentifier:
        return
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{1,39}", seg.value)
