"""What crosses between the front end and the diagnostics process: frames, errors, metrics."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from prometheus_client import CollectorRegistry, Counter, Histogram

from pve_steward import errors
from pve_steward.config import Settings, load_settings
from pve_steward.observe.instruments import render
from pve_steward.pve.ids import InvalidIdentifier
from pve_steward.pveio.admission import Busy
from pve_steward.security.guard import Refused
from pve_steward.serving.worker.child import _error_frame
from pve_steward.serving.worker.frames import blob, encode, load_shared, read_frame
from pve_steward.serving.worker.link import ProcessGone, Start, revive


def test_frames_round_trip_and_end_cleanly() -> None:
    async def run() -> list[object]:
        reader = asyncio.StreamReader()
        reader.feed_data(encode(("call", 1, {"a": [1, 2]})) + encode(("cancel", 1)) + encode(("x",))[:3])
        reader.feed_eof()
        return [await read_frame(reader) for _ in range(3)]

    assert asyncio.run(run()) == [("call", 1, {"a": [1, 2]}), ("cancel", 1), None]  # a cut frame is the end


def test_equal_result_payloads_are_one_object_while_it_lives() -> None:
    """The child pickles a shared run's result once; the callers here get one object, as in-process."""
    from pve_steward.analysis.findings import Counts

    payload = blob(Counts(critical=1))
    first = load_shared(payload)
    assert load_shared(bytes(bytearray(payload))) is first  # another frame, the same bytes
    assert load_shared(blob(Counts(critical=2))) is not first
    rows = blob([1, 2])
    assert load_shared(rows) == [1, 2] and load_shared(rows) is not load_shared(rows), "a list is unpickled each time"


def test_a_corrupt_length_is_refused() -> None:
    async def run() -> object:
        reader = asyncio.StreamReader()
        reader.feed_data(b"\xff\xff\xff\xff")
        reader.feed_eof()
        return await read_frame(reader)

    with pytest.raises(ValueError, match="corrupt"):
        asyncio.run(run())


@pytest.mark.parametrize(
    "exc",
    [
        Refused("no guest 5 is visible in this cluster"),
        Busy("busy: 4 heavy operations are running"),
        ToolError("plain"),
        ProcessGone("gone"),
        errors.PveError("boom", status=500, path="/cluster/resources"),
        errors.PvePermissionError("Permission check failed (/vms/100, VM.Audit)", path="/nodes"),
        errors.PveParamError("Parameter verification failed.", {"vmid": "invalid"}, status=400),
        errors.PveTimeout("timed out", path="/nodes"),
        InvalidIdentifier("vmid", 5, "must be 100-999999999"),
        errors.PveTlsError("certificate verify failed", path="/version"),
        TypeError("a value of unexpected type"),
    ],
)
def test_errors_the_guard_maps_cross_as_themselves(exc: BaseException) -> None:
    kind, call_id, blob, text = _error_frame(7, exc)
    back = revive(blob, text)
    assert (kind, call_id, type(back), str(back), back.__dict__) == ("error", 7, type(exc), str(exc), exc.__dict__)


def test_an_error_that_does_not_pickle_keeps_its_words() -> None:
    class Local(Exception):  # a class defined in a function cannot be pickled
        pass

    _kind, _id, blob, text = _error_frame(1, Local("the words"))
    back = revive(blob, text)
    assert isinstance(back, ToolError) and str(back) == "the words"
    assert isinstance(revive(pickle.dumps("not an exception"), "why"), ToolError)


def test_metrics_of_both_processes_are_one_family_with_values_added() -> None:
    child = CollectorRegistry()
    requests = Counter("pve_steward_pve_requests", "PVE API requests", ["endpoint"], registry=child)
    latency = Histogram("pve_steward_pve_request_duration_seconds", "d", ["endpoint"], buckets=(0.1, 1), registry=child)
    requests.labels(endpoint="nodes").inc(5)
    latency.labels(endpoint="nodes").observe(0.05)
    front = render()
    merged = render([list(child.collect())]).decode()
    base = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in front.decode().splitlines()
        if line and not line.startswith("#")
    }
    bucket = 'pve_steward_pve_request_duration_seconds_bucket{endpoint="nodes",le="0.1"}'
    assert merged.count("# TYPE pve_steward_pve_requests_total counter") == 1
    assert 'pve_steward_pve_requests_total{endpoint="nodes"} 5.0' in merged  # the child's own label set
    assert f"{bucket} {base.get(bucket, 0.0) + 1}" in merged  # this process's count plus the child's one


def test_the_child_gets_the_secrets_the_front_end_read_not_the_files(tmp_path: Path) -> None:
    secret, pbs = tmp_path / "secret", tmp_path / "pbs"
    secret.write_text("front-end-secret\n")
    pbs.write_text("pbs-secret\n")
    secret.chmod(0o600)
    pbs.chmod(0o600)
    settings = load_settings(
        url="pve.example:8006",
        token_id="ops@pve!mcp",
        token_secret_file=secret,
        pbs_url="pbs.example",
        pbs_token_id="ops@pbs!mcp",
        pbs_token_secret_file=pbs,
        audit_log=tmp_path / "audit.jsonl",
    )
    start = pickle.loads(pickle.dumps(Start(settings, [])))
    secret.write_text("rotated\n")  # what the file says after the front end started does not reach the child
    pbs.unlink()
    assert (start.settings.secret(), start.settings.pbs_secret()) == ("front-end-secret", "pbs-secret")
    assert start.settings.token_secret_file is None and start.settings.pbs_token_secret_file is None
    assert type(start.settings) is Settings  # not load_settings' per-file subclass, which does not pickle


@pytest.mark.anyio
async def test_callers_of_one_run_waiting_in_the_lane_share_one_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer of a shared run is one step in the heavy lane (urgency.py); a caller unpickled its result
    only when its turn came, after the caller before had written its answer and dropped its object, so
    fifty callers of one run unpickled and encoded fifty answers instead of one."""
    import types
    import weakref

    from pve_steward.analysis.findings import Counts
    from pve_steward.pveio.urgency import URGENCY
    from pve_steward.serving.worker import frames
    from pve_steward.serving.worker.link import WorkerLink

    settings = load_settings(url="pve.example:8006", token_id="ops@pve!mcp", audit_log=tmp_path / "audit.jsonl")
    link = WorkerLink(settings, [])
    calls: list[int] = []

    class Sender:
        async def send(self, message: tuple[object, ...]) -> None:
            calls.append(int(message[1]))  # type: ignore[call-overload]

    sender = Sender()

    async def ready() -> Sender:
        return sender

    monkeypatch.setattr(link, "_ready", ready)
    unpickled: list[bytes] = []

    def counted(data: bytes) -> object:
        unpickled.append(data)
        return pickle.loads(data)

    monkeypatch.setattr(
        frames,
        "pickle",
        types.SimpleNamespace(loads=counted, dumps=pickle.dumps, HIGHEST_PROTOCOL=pickle.HIGHEST_PROTOCOL),
    )
    app = types.SimpleNamespace(cluster=None, naming=None, pve_version=None)
    t = types.SimpleNamespace(app=app, op=types.SimpleNamespace(name="check_cluster_health"), progress=None)
    answered: list[weakref.ref[object]] = []

    async def caller() -> None:
        with URGENCY.heavy_request() as step:
            result = await link.call(t, {})
            answered.append(weakref.ref(result))
            await asyncio.sleep(0)  # the SDK encodes and writes the answer
            del result  # and lets it go
            step.end()

    callers = [asyncio.create_task(caller()) for _ in range(3)]
    while len(calls) < 3:
        await asyncio.sleep(0)
    payload = blob(Counts(critical=1))  # the child pickles a shared run's result once
    for call_id in calls:
        link._pending[call_id][0].put_nowait(("result", call_id, payload))
    await asyncio.wait_for(asyncio.gather(*callers), 30)
    assert len(answered) == 3 and len(unpickled) == 1, "the callers waiting in the lane got one object"
