"""Identifiers are checked against PVE's formats before any request; paths contain nothing else."""

from __future__ import annotations

import re
import unicodedata
import urllib.parse

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from pve_steward.pve.ids import InvalidIdentifier, parse_upid
from pve_steward.pveio.client import Segment, api_path, ha_sid, node, replication_job, snapshot, storage, upid, vmid

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


# ---------------------------------------------------------------- UPIDs and the request line

# pve-common src/PVE/UPID.pm encode: UPID:node:%08X pid:%08X pstart:%08X starttime:type:id:user:
GOOD_UPIDS = [
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:root@pam:",
    "UPID:pve1:00001234:1ABCDEF00:6B10377E:vzdump::root@pam:",  # 9-digit pstart, empty id
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:we?ird#us%er@pve!tok:",  # PVE user names allow these
]
BAD_UPIDS = [
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:root@pam:\n",  # Perl's $ would take it; we do not
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:root@pam",  # no final colon
    "UPID:pve1:1234:00ABCDEF:6B10377E:qmstart:100:root@pam:",  # pid not 8 hex digits
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qm start:100:root@pam:",  # whitespace in a field
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:ro\x07ot@pam:",  # control character
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:ro\x00ot@pam:",
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:ro\x7fot@pam:",
    "UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:1/0:root@pam:",  # '/' in a field
    "UPID:-pve1:00001234:00ABCDEF:6B10377E:qmstart:100:root@pam:",  # node grammar
    "upid:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:root@pam:",
]


@pytest.mark.parametrize("good", GOOD_UPIDS)
def test_upids_follow_pve_grammar(good: str) -> None:
    assert upid(good).value == good


@pytest.mark.parametrize("bad", BAD_UPIDS)
def test_upids_outside_pve_grammar_are_refused(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match=r"^invalid upid "):
        upid(bad)


def _client(**extra: object):  # type: ignore[no-untyped-def]
    from pve_steward.config import Settings
    from pve_steward.pveio.client import ProxmoxerClient

    values: dict[str, object] = {"url": "pve.invalid:8006", "token_id": "ops@pve!mcp", "token_secret": "s" * 36}
    values.update(extra)
    return ProxmoxerClient(Settings(**values))  # type: ignore[arg-type]


class _Recorder:
    """Stands in for the network under requests: records each prepared request and answers JSON."""

    def __init__(self) -> None:
        self.sent: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, **_: object) -> requests.Response:
        self.sent.append(request)
        response = requests.Response()
        response.status_code = 200
        response._content = b'{"data": {"status": "stopped"}}'
        response.headers["Content-Type"] = "application/json"
        response.request = request
        return response


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    rec = _Recorder()
    # the transport: reads go to it directly (client.py _lean_session), writes through Session.send
    from requests.adapters import HTTPAdapter

    monkeypatch.setattr(HTTPAdapter, "send", lambda self, request, **kw: rec.send(request, **kw))
    return rec


@pytest.mark.anyio
async def test_a_upid_with_query_and_fragment_characters_is_percent_encoded_on_the_request_line(
    recorder: _Recorder,
) -> None:
    client = _client()
    try:
        raw = GOOD_UPIDS[2]
        await client.get(api_path("nodes", node("pve1"), "tasks", upid(raw), "status"))
    finally:
        client.close()
    (sent,) = recorder.sent
    path = sent.path_url
    assert "?" not in path and "#" not in path
    assert re.fullmatch(r"(?:[^%]|%[0-9A-F]{2})*", path), path  # every '%' starts an escape
    assert path.endswith(
        "/nodes/pve1/tasks/UPID:pve1:00001234:00ABCDEF:6B10377E:qmstart:100:we%3Fird%23us%25er@pve%21tok:/status"
    )
    assert urllib.parse.unquote(path).endswith(f"/tasks/{raw}/status")


@given(st.text(max_size=60))
def test_no_segment_puts_query_fragment_percent_or_control_characters_on_the_line(text: str) -> None:
    try:
        seg = Segment(text)
    except ValueError:
        assert text in ("", ".", "..") or any(unicodedata.category(c) == "Cc" for c in text)
        return
    (encoded,) = api_path(seg).encoded()
    assert not set(encoded) & {"?", "#", "/", " "} and not any(unicodedata.category(c) == "Cc" for c in encoded)
    assert re.fullmatch(r"(?:[^%]|%[0-9A-F]{2})*", encoded) and urllib.parse.unquote(encoded) == text


@pytest.mark.anyio
@pytest.mark.parametrize("extra", [{"read_only": True}, {"tier": "read_only"}])
async def test_a_read_only_servers_client_refuses_writes_before_sending(
    recorder: _Recorder, extra: dict[str, object]
) -> None:
    from pve_steward.pveio.client import WriteRefused

    client = _client(**extra)
    try:
        for method in ("POST", "PUT", "DELETE"):
            with pytest.raises(WriteRefused, match=f"^{method} /nodes/pve1/qemu/100/status/stop refused: .*read-only"):
                await client.call(method, api_path("nodes", node("pve1"), "qemu", vmid(100), "status", "stop"))  # type: ignore[arg-type]
        assert await client.get(api_path("version")) == {"status": "stopped"}
    finally:
        client.close()
    assert [r.method for r in recorder.sent] == ["GET"]


@pytest.mark.anyio
async def test_a_writing_servers_client_sends_the_post(recorder: _Recorder) -> None:
    client = _client(tier="operator")
    try:
        await client.call("POST", api_path("nodes", node("pve1"), "qemu", vmid(100), "status", "start"))
    finally:
        client.close()
    assert [(r.method, r.path_url) for r in recorder.sent] == [("POST", "/api2/json/nodes/pve1/qemu/100/status/start")]
