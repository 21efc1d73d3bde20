"""The audit log: a hash chain that shows edits, deletions and reordering, and survives crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pve_steward.cli import main
from pve_steward.security.audit import AuditLog, redact_params, verify


def _write(path: Path, n: int = 5) -> AuditLog:
    log = AuditLog(path)
    for i in range(n):
        log.append({"event": "tool_call", "tool": "guest_start", "params": {"vmid": 100 + i}, "outcome": "ok"})
    return log


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_chain_verifies_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 3)
    _write(path, 2)  # a restart continues the chain
    result = verify(path)
    assert result.ok and result.records == 5
    seqs = [json.loads(line)["seq"] for line in _lines(path)]
    assert seqs == [1, 2, 3, 4, 5]
    assert result.head == json.loads(_lines(path)[-1])["hash"]


def test_an_edited_record_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    lines = _lines(path)
    lines[2] = lines[2].replace('"outcome":"ok"', '"outcome":"denied"')
    path.write_text("".join(lines))
    result = verify(path)
    assert not result.ok and result.first_bad_line == 3 and "edited" in (result.problem or "")


def test_a_deleted_record_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    lines = _lines(path)
    del lines[1]
    path.write_text("".join(lines))
    result = verify(path)
    assert not result.ok and result.first_bad_line == 2 and "deleted, inserted or reordered" in (result.problem or "")


def test_reordered_records_are_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    lines = _lines(path)
    lines[2], lines[3] = lines[3], lines[2]
    path.write_text("".join(lines))
    result = verify(path)
    assert not result.ok and result.first_bad_line == 3


def test_rehashed_edit_still_breaks_the_next_link(tmp_path: Path) -> None:
    """Someone who recomputes the edited record's hash still breaks the following record's ``prev``."""
    from pve_steward.security.audit import record_hash

    path = tmp_path / "audit.jsonl"
    _write(path)
    lines = _lines(path)
    record = json.loads(lines[1])
    record["outcome"] = "denied"
    record["hash"] = record_hash(record)
    lines[1] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))
    result = verify(path)
    assert not result.ok and result.first_bad_line == 3


def test_a_cut_tail_is_detected_with_an_anchor(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    anchor = verify(path).head
    path.write_text("".join(_lines(path)[:-2]))
    assert verify(path).ok  # a chain alone cannot see a cut tail...
    cut = verify(path, anchor=anchor)
    assert not cut.ok and "removed from its end" in (cut.problem or "")  # ...the anchor can


def test_incomplete_tail_is_cut_on_open_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 3)
    with path.open("ab") as fh:
        fh.write(b'{"seq":4,"event":"tool_call","tool":"gue')  # a crash mid-write
    assert not verify(path).ok
    AuditLog(path)
    result = verify(path)
    assert result.ok and result.records == 4
    assert json.loads(_lines(path)[-1])["event"] == "audit_recovered"


def test_secrets_are_redacted_and_tokens_reduced_to_a_fingerprint() -> None:
    token = "eyJhbGciOi.abcdefghijklmnopqrstuvwxyz"
    out = redact_params({"confirm_token": token, "cipassword": "hunter2", "token_secret": "s", "vmid": 1})
    assert out["confirm_token"].startswith("sha256:") and token not in json.dumps(out)
    assert out["cipassword"] == out["token_secret"] == "***redacted***" and out["vmid"] == 1


def test_audit_verify_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    assert main(["audit", "verify", "--file", str(path)]) == 0
    assert "OK, 5 records" in capsys.readouterr().out
    lines = _lines(path)
    lines[3] = lines[3].replace("guest_start", "guest_stop")
    path.write_text("".join(lines))
    assert main(["audit", "verify", "--file", str(path)]) == 1
    assert "BROKEN at line 4" in capsys.readouterr().out
    assert main(["audit", "verify", "--file", str(path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["first_bad_line"] == 4
    assert main(["audit", "verify", "--file", str(tmp_path / "missing.jsonl")]) == 2


WRITER = """
import sys
from pathlib import Path
from pve_steward.security.audit import AuditLog
log = AuditLog(Path(sys.argv[1]))
print("ready", flush=True)
i = 0
while True:
    i += 1
    log.append({"event": "tool_call", "tool": "guest_migrate", "params": {"vmid": i, "pad": "x" * (i % 700)}})
"""


def _records_in(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_during_writes_never_corrupts_complete_records(tmp_path: Path) -> None:
    """Kill a writer at random moments, again and again: every complete record always verifies."""
    path = tmp_path / "audit.jsonl"
    total = 0
    for round_ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env={**os.environ, "PYTHONHASHSEED": "0"}
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        # this writer has committed a record, and the file holds round_ + 2 (nine by the last round); the
        # bound is only against a hang
        wanted = max(_records_in(path) + 1, round_ + 2)
        deadline = time.monotonic() + 60
        while _records_in(path) < wanted and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05 + 0.03 * round_)  # then the kill lands at some moment of its writes
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        data = path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        (tmp_path / "complete.jsonl").write_bytes(complete)
        result = verify(tmp_path / "complete.jsonl")
        assert result.ok, (round_, result)
        assert result.records >= total  # nothing already written was lost
        total = result.records
    AuditLog(path)  # reopening repairs a torn tail, if the kill left one
    final = verify(path)
    assert final.ok and final.records >= total > 8


APPENDER = """
import sys, threading
from pathlib import Path
from pve_steward.security.audit import AuditLog
log = AuditLog(Path(sys.argv[1]))
name, count = sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()  # both processes start appending together
def appends(thread):  # threads too: each process's group commits interleave with the other's
    for i in range(count):
        log.append({"event": "tool_call", "tool": "guest_start", "writer": name, "thread": thread, "i": i})
threads = [threading.Thread(target=appends, args=(t,)) for t in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("done", flush=True)
"""


def test_two_processes_append_to_one_log_as_one_chain(tmp_path: Path) -> None:
    """Two servers on one machine share the default log: both write every record, in one chain, no fork."""
    path = tmp_path / "audit.jsonl"
    _write(path, 2)  # an existing chain both continue
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(path), name, "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("desktop", "cursor")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.close()
            proc.stdout.close()
    result = verify(path)
    assert result.ok and result.records == 2 + 2 * 4 * 60, result
    records = [json.loads(line) for line in _lines(path)]
    for name in ("desktop", "cursor"):
        mine = {(r["thread"], r["i"]) for r in records if r.get("writer") == name}
        assert mine == {(t, i) for t in range(4) for i in range(60)}  # every record of each, once
    writers = [r.get("writer") for r in records[2:]]
    assert writers.count("desktop") == writers.count("cursor")


TORN = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)  # a writer inside its commit, as audit.py holds the lock
os.write(fd, b'{"seq":4,"event":"tool_call","tool":"gue')
print("ready", flush=True)
time.sleep(60)
"""


def test_a_writer_killed_mid_commit_leaves_a_tail_the_next_append_cuts_and_records(tmp_path: Path) -> None:
    """Another process dies holding the lock with half a record written: its lock goes with it, and this
    process's next append cuts the torn tail, says so in the chain, and goes on from the last whole record."""
    path = tmp_path / "audit.jsonl"
    log = _write(path, 3)
    holder = subprocess.Popen([sys.executable, "-c", TORN, str(path)], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    log.append({"event": "tool_call", "tool": "guest_stop", "outcome": "ok"})
    result = verify(path)
    assert result.ok and result.records == 5, result
    events = [json.loads(line)["event"] for line in _lines(path)]
    assert events[3] == "audit_recovered" and events[4] == "tool_call"


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)  # a writer stopped inside its commit (SIGSTOP, a hung disk)
print("ready", flush=True)
time.sleep(60)
"""


def test_an_append_behind_a_stopped_writer_fails_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is never silently dropped and a write never hangs behind another process: past the lock's
    wait, the append fails (so the write it guards is refused), naming the file and the option."""
    from pve_steward.security import audit as audit_module
    from pve_steward.security.audit import AuditLogBusy

    path = tmp_path / "audit.jsonl"
    log = _write(path, 1)
    monkeypatch.setattr(audit_module, "LOCK_WAIT", 0.2)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        with pytest.raises(AuditLogBusy) as info:
            log.append({"event": "tool_call", "tool": "guest_start", "outcome": "ok"})
        message = str(info.value)
        assert str(path) in message and "--audit-log" in message and "another process" in message
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    log.append({"event": "tool_call", "tool": "guest_stop", "outcome": "ok"})  # the lock died with its holder
    assert verify(path).ok and verify(path).records == 2


def test_a_log_moved_aside_is_not_written_on(tmp_path: Path) -> None:
    """Rotated by hand: the next record starts a chain in the file at the path, where other processes write."""
    path = tmp_path / "audit.jsonl"
    log = _write(path, 2)
    path.rename(tmp_path / "audit.old.jsonl")
    log.append({"event": "tool_call", "tool": "guest_stop", "outcome": "ok"})
    assert verify(tmp_path / "audit.old.jsonl").records == 2
    fresh = verify(path)
    assert fresh.ok and fresh.records == 1


def test_one_process_shares_one_writer_and_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    a, b = AuditLog(path), AuditLog(path)
    for i in range(3):
        a.append({"event": "x", "i": i})
        b.append({"event": "y", "i": i})
    result = verify(path)
    assert result.ok and result.records == 6


def test_appends_at_the_same_moment_share_an_fsync_and_keep_one_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: 30 threads appending while an fsync is under way wait for the next one, not for 30 in a
    row; each gets its own record back, on disk and in the chain."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:  # a busy disk: the real fsync, then the time it can take under load
        real_fsync(fd)
        time.sleep(0.02)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    start = threading.Barrier(30)
    returned: dict[int, dict[str, object]] = {}

    def one(i: int) -> None:
        start.wait()
        returned[i] = log.append({"event": "tool_call", "tool": "get_guest", "params": {"vmid": i}})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result = verify(path)
    assert result.ok and result.records == 30
    on_disk = {json.loads(line)["params"]["vmid"]: json.loads(line) for line in _lines(path)}
    assert on_disk == returned  # every caller got exactly its own record, as written
    assert sorted(int(str(r["seq"])) for r in returned.values()) == list(range(1, 31))
    assert log._w.fsyncs <= 10  # overlapping appends shared commits (one at a time would be 30)


def test_a_record_that_cannot_be_written_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    circular: dict[str, object] = {}
    circular["self"] = circular
    log.append({"event": "x", "i": 1})
    with pytest.raises(ValueError, match="Circular"):
        log.append({"event": "x", "params": circular})
    log.append({"event": "x", "i": 2})
    result = verify(path)
    assert result.ok and result.records == 2


@pytest.mark.parametrize(
    "garbage", [b"\x00\x00\x00\x00\n", b"not json at all\n", b'{"seq": "x"}\n', b"[1, 2]\n", b"a\rb\r\n"]
)
def test_a_garbage_last_line_is_recovered_like_a_torn_tail(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 3)
    with path.open("ab") as fh:
        fh.write(garbage)
    AuditLog(path).append({"event": "tool_call", "tool": "guest_start", "outcome": "ok"})
    result = verify(path)
    assert result.ok and result.records == 5
    records = [json.loads(line) for line in _lines(path)]
    assert records[3]["event"] == "audit_recovered" and f"cut {len(garbage)} bytes" in records[3]["detail"]


def test_a_broken_chain_is_reported_loudly_at_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 4)
    lines = _lines(path)
    del lines[1]
    path.write_text("".join(lines))
    code = "import sys, pathlib; from pve_steward.security.audit import AuditLog; AuditLog(pathlib.Path(sys.argv[1]))"
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0  # never a crash: the log keeps working
    assert "IS BROKEN at line 2" in out.stderr and "deleted, inserted or reordered" in out.stderr


def test_verify_refuses_duplicate_keys_and_rewritten_lines(tmp_path: Path) -> None:
    from pve_steward.security.audit import record_hash

    path = tmp_path / "audit.jsonl"
    _write(path, 3)
    lines = _lines(path)
    record = json.loads(lines[1])
    # A duplicate key: one parser reads "ok", another "denied"; the hash covers only the parsed dict.
    lines[1] = lines[1].replace('"outcome":"ok"', '"outcome":"denied","outcome":"ok"')
    path.write_text("".join(lines))
    dup = verify(path)
    assert not dup.ok and dup.first_bad_line == 2 and "duplicate key 'outcome'" in (dup.problem or "")

    lines[1] = json.dumps(record, sort_keys=True, indent=None) + "\n"  # same content, other spacing
    assert record_hash(json.loads(lines[1])) == record["hash"]
    path.write_text("".join(lines))
    spaced = verify(path)
    assert not spaced.ok and spaced.first_bad_line == 2 and "canonical" in (spaced.problem or "")


def test_client_identity_is_cut_to_a_bounded_length(tmp_path: Path) -> None:
    from pve_steward.security.audit import CLIENT_MAX

    path = tmp_path / "audit.jsonl"
    record = AuditLog(path).append({"event": "tool_call", "client": "x" * 100_000 + "/1.0"})
    assert len(record["client"]) <= CLIENT_MAX + 10 and record["client"].endswith("[cut]")
    assert len(path.read_bytes()) < 1000 and verify(path).ok


def test_audit_pending_lists_writes_without_an_outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    for wid in ("a1", "b2", "c3"):
        log.append({"event": "write_executing", "write_id": wid, "operation": "guest_reset", "target": {"vmid": 100}})
    log.append(
        {
            "event": "write_submitted",
            "write_id": "b2",
            "upid": "UPID:pve1:00000001:00000002:00000003:qmreset:100:x@pve!t:",
        }
    )
    log.append({"event": "write_outcome", "write_id": "a1", "outcome": "ok"})
    assert main(["audit", "pending", "--file", str(path)]) == 1
    out = capsys.readouterr().out
    assert "2 write(s)" in out and "line 2" in out and "line 3" in out and "qmreset" in out and "line 1 " not in out
    assert main(["audit", "verify", "--file", str(path)]) == 0
    assert "2 write(s) have an 'executing' record and no outcome" in capsys.readouterr().out
    assert main(["audit", "pending", "--file", str(path), "--json"]) == 1
    assert [w["write_id"] for w in json.loads(capsys.readouterr().out)] == ["b2", "c3"]
    log.append({"event": "write_outcome", "write_id": "b2", "outcome": "unknown"})
    log.append({"event": "write_outcome", "write_id": "c3", "outcome": "cancelled"})
    assert main(["audit", "pending", "--file", str(path)]) == 0
    assert "no pending writes" in capsys.readouterr().out


@pytest.mark.anyio
async def test_records_from_the_event_loop_go_through_one_thread_and_share_commits(tmp_path: Path) -> None:
    """``record``: fifty at once take one committing thread (not fifty of anyio's workers) and a few fsyncs;
    a caller cancelled while waiting still leaves its record."""
    import anyio

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    before = {t.ident for t in threading.enumerate()}
    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(log.record, {"event": "tool_call", "tool": "get_guest", "params": {"vmid": i}})
    with anyio.move_on_after(0):  # cancelled at its first wait: the record is still written
        await log.record({"event": "tool_call", "tool": "cancelled"})
    new = [t.name for t in threading.enumerate() if t.ident not in before]
    assert new == ["audit-commit"], new
    result = verify(path)
    assert result.ok and result.records == 51
    assert {json.loads(line)["tool"] for line in _lines(path)} == {"get_guest", "cancelled"}
    assert log._w.fsyncs < 51


class _Refusing:
    """A forwarder that refuses the record whose event is "refuse" (a full spool disk), and may hold the
    committing thread in the record "first" until ``hold`` is set."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.hold = hold
        self.holding = threading.Event()  # set once the committing thread waits in "first"
        self.events: list[str] = []

    def enqueue(self, line: bytes) -> None:
        event = json.loads(line)["event"]
        if event == "first" and self.hold is not None:
            self.holding.set()
            self.hold.wait(60)
        if event == "refuse":
            raise OSError(28, "No space left on device")
        self.events.append(event)

    def flush(self, timeout: float) -> bool:
        return True


def test_a_record_the_forwarder_refuses_fails_for_its_caller(tmp_path: Path) -> None:
    """A forwarder that raises (a full spool disk) fails the record it refused and the later ones of its commit."""
    forward = _Refusing()
    log = AuditLog(tmp_path / "audit.jsonl", forward=forward)
    log.append({"event": "x", "i": 1})
    with pytest.raises(OSError, match="No space"):
        log.append({"event": "refuse"})
    assert forward.events == ["x"]


@pytest.mark.anyio
async def test_a_record_the_forwarder_refuses_in_a_shared_commit_fails_for_it_and_the_later_ones(
    tmp_path: Path,
) -> None:
    """``record`` from the event loop: the committing thread commits what was posted meanwhile at once. A forwarder
    that refuses one line of that commit fails its caller and the later ones; the earlier ones were forwarded."""
    import anyio
    import anyio.to_thread

    gate = threading.Event()
    forward = _Refusing(hold=gate)  # the committing thread waits in "first" while the next three are posted
    log = AuditLog(tmp_path / "audit.jsonl", forward=forward)
    outcomes: dict[str, str] = {}

    async def record(event: str) -> None:
        try:
            await log.record({"event": event})
            outcomes[event] = "ok"
        except OSError as exc:
            outcomes[event] = exc.strerror or "error"

    async with anyio.create_task_group() as tg:
        tg.start_soon(record, "first")
        assert await anyio.to_thread.run_sync(forward.holding.wait, 60)  # "first" is in its commit, held
        for event in ("before", "refuse", "after"):
            tg.start_soon(record, event)
        await anyio.wait_all_tasks_blocked()  # all three posted to the committing thread's inbox, and waiting
        gate.set()
    assert outcomes == {
        "first": "ok",
        "before": "ok",
        "refuse": "No space left on device",
        "after": "No space left on device",
    }
    assert forward.events == ["first", "before"]
    assert log._w.fsyncs == 2, "the three posted meanwhile were one commit"


def test_a_write_that_fails_part_way_leaves_no_partial_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk mid-write: the records fail for their callers, the half line is taken back, and the chain
    goes on unbroken once the disk has room again."""
    from pve_steward.security import audit as audit_module

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.append({"event": "before"})
    whole = audit_module._write_all

    def half_then_full(fd: int, data: bytes) -> None:
        whole(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_module, "_write_all", half_then_full)
    with pytest.raises(OSError, match="No space"):
        log.append({"event": "lost", "padding": "x" * 200})
    monkeypatch.setattr(audit_module, "_write_all", whole)
    log.append({"event": "after"})
    result = verify(path)
    assert result.ok and result.records == 2, result
    assert [json.loads(line)["event"] for line in _lines(path)] == ["before", "after"]


@pytest.mark.anyio
async def test_the_committing_thread_keeps_no_writer_once_its_log_is_gone(tmp_path: Path) -> None:
    """An idle committing thread holds nothing of its last batch: once the log is dropped its writer goes, and
    with it the file's lock (another process could not open the log while a stale writer held it)."""
    import gc
    import weakref

    import anyio

    class Refusing(_Refusing):
        def enqueue(self, line: bytes) -> None:
            raise OSError(28, "No space left on device")  # a failed batch too: its error keeps no frame

    log = AuditLog(tmp_path / "audit.jsonl")
    await log.record({"event": "written"})
    failing = AuditLog(tmp_path / "failing.jsonl", forward=Refusing())
    with pytest.raises(OSError, match="No space"):
        await failing.record({"event": "refused"})
    writers = [weakref.ref(log._w), weakref.ref(failing._w)]
    del log, failing
    for _ in range(100):
        gc.collect()
        if all(w() is None for w in writers):
            break
        await anyio.sleep(0.01)
    assert [w() for w in writers] == [None, None], "a committing thread still holds its writer"


FORWARDER = """
import sys, time
from pathlib import Path
from pve_steward.security.syslog import open_audit
open_audit(Path(sys.argv[1]), syslog="tcp://127.0.0.1:9")  # nothing listens: records wait in the queue
print("ready", flush=True)
time.sleep(60)
"""


def test_a_second_process_forwarding_the_same_log_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    """Several processes write one log, but one sends it to syslog: two senders on one queue would send records
    twice and out of order."""
    from pve_steward.security.audit import AuditLogBusy
    from pve_steward.security.syslog import open_audit

    path = tmp_path / "audit.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", FORWARDER, str(path)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        with pytest.raises(AuditLogBusy) as info:
            open_audit(path, syslog="tcp://127.0.0.1:9")
        assert "syslog queue" in str(info.value) and "--audit-log" in str(info.value)
        AuditLog(path).append({"event": "tool_call", "tool": "guest_start"})  # writing without forwarding is fine
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert verify(path).ok and verify(path).records == 1
