"""The front end's cheap calls, shared with the diagnostics process: published, followed, bounded, removed.

Ordering and bounds only, with generous waits, never a duration (as test_urgency.py).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pve_steward.config import load_settings
from pve_steward.pveio.urgency import Urgency
from pve_steward.pveio.urgencyboard import UrgencyBoard
from pve_steward.serving.worker.link import WorkerLink


def test_a_cheap_call_is_published_while_it_runs_and_cleared_when_it_ends() -> None:
    front, board = Urgency(grace=60), UrgencyBoard.create()
    try:
        front.share(board)
        assert board.until() == 0.0
        with front.urgent():
            assert board.until() > time.monotonic()  # background work elsewhere should wait
            with front.urgent():  # a nested mark is the same call
                pass
            assert board.until() > time.monotonic()
        assert board.until() == 0.0
    finally:
        front.unshare(board)
        board.close()
    assert board.fd is None


def test_a_follower_waits_while_the_front_end_holds_a_cheap_call_and_goes_on_when_it_ends() -> None:
    front, child, board = Urgency(grace=60), Urgency(grace=60), UrgencyBoard.create()
    reader = UrgencyBoard.attach(os.dup(board.fd))  # type: ignore[arg-type]
    front.share(board)
    child.follow(reader)
    passed = threading.Event()
    try:
        with front.urgent():
            worker = threading.Thread(target=lambda: (child.give_way(), passed.set()))
            worker.start()
            assert not passed.wait(0.2), "the follower's background work went on while a cheap call ran"
        assert passed.wait(10), "the follower's background work did not resume when the cheap call ended"
        worker.join()
        # seen open while giving way: calls are coming for a grace after, though the board is clear now
        assert child.coming() and board.until() == 0
    finally:
        front.unshare(board)
        reader.close()
        board.close()


def test_a_follower_waits_one_grace_at_most() -> None:
    front, child, board = Urgency(grace=60), Urgency(grace=0.05), UrgencyBoard.create()
    front.share(board)
    child.follow(UrgencyBoard.attach(os.dup(board.fd)))  # type: ignore[arg-type]
    passed = threading.Event()
    try:
        with front.urgent():  # the front end's call runs on: the follower's own grace bounds its wait
            worker = threading.Thread(target=lambda: (child.give_way(), passed.set()))
            worker.start()
            assert passed.wait(10), "background work starved behind another process's long call"
        worker.join()
    finally:
        front.unshare(board)
        board.close()


def test_a_follower_knows_cheap_calls_are_coming_while_the_front_end_holds_one_and_a_grace_after() -> None:
    front, child, board = Urgency(grace=60), Urgency(grace=0.05), UrgencyBoard.create()
    front.share(board)
    child.follow(UrgencyBoard.attach(os.dup(board.fd)))  # type: ignore[arg-type]
    try:
        assert not child.coming()
        with front.urgent():
            assert child.coming() and not child.holding()  # the front end's call, not the child's
        for _ in range(1000):  # after the call, for the follower's own grace
            if not child.coming():
                break
            time.sleep(0.01)
        assert not child.coming(), "the follower kept capping its requests long after the cheap call"
    finally:
        front.unshare(board)
        board.close()


def test_another_process_reads_what_this_one_publishes() -> None:
    """The board is shared memory: a process handed its descriptor sees the front end's cheap call, then its end."""
    front, board = Urgency(grace=60), UrgencyBoard.create()
    front.share(board)
    script = textwrap.dedent(
        f"""
        import sys, time
        from pve_steward.pveio.urgencyboard import UrgencyBoard
        board = UrgencyBoard.attach({board.fd})
        print("held" if board.until() > time.monotonic() else "clear", flush=True)
        sys.stdin.readline()
        print("held" if board.until() > time.monotonic() else "clear", flush=True)
        """
    )
    try:
        with subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=[board.fd],  # type: ignore[list-item]
        ) as other:
            assert other.stdin is not None and other.stdout is not None
            with front.urgent():
                assert other.stdout.readline().strip() == "held"
            other.stdin.write("\n")
            other.stdin.flush()
            assert other.stdout.readline().strip() == "clear"
    finally:
        front.unshare(board)
        board.close()


def test_the_board_has_no_name_and_the_link_closes_it(tmp_path: Path) -> None:
    settings = load_settings(url="pve.example:8006", token_id="ops@pve!mcp", audit_log=tmp_path / "audit.jsonl")
    link = WorkerLink(settings, [])
    fd = link._start.urgency_board
    assert fd is not None
    assert os.fstat(fd).st_nlink == 0  # nothing to leave behind, even if the server is killed
    reader = UrgencyBoard.attach(os.dup(fd))
    assert reader.until() == 0.0
    reader.close()
    asyncio.run(link.close())
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the link
