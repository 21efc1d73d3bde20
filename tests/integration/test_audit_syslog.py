"""Audit off the box: every record reaches a real syslog receiver (RFC 5424, octet-counted, TCP or TLS) in
chain order, survives the receiver being down, and with required delivery a write is refused before it starts."""

from __future__ import annotations

import json
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pve_steward.security.audit import GENESIS, record_hash
from pvesim.server import SimServer, make_certificate
from tests.httpserver import free_port
from tests.syslogreceiver import SyslogReceiver

pytestmark = pytest.mark.anyio


def local_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_chain(records: list[dict[str, Any]]) -> None:
    prev = GENESIS
    for n, record in enumerate(records, start=1):
        assert record["seq"] == n and record["prev"] == prev and record_hash(record) == record["hash"], record
        prev = record["hash"]


async def reads(c: Client) -> None:
    assert not (await c.call_tool("list_guests", {})).is_error
    assert (await c.call_tool("get_guest", {"vmid": 999})).is_error


async def test_every_record_reaches_syslog_with_its_chain_intact(
    demo_sim: SimServer, server_for: Any, tmp_path: Path
) -> None:
    receiver = SyslogReceiver().start()
    try:
        async with Client(server_for(demo_sim, audit_syslog=f"tcp://127.0.0.1:{receiver.port}")) as c:
            await reads(c)
        local = local_records(tmp_path / "audit.jsonl")
        got = receiver.wait_for(len(local))
    finally:
        receiver.stop()
    assert not receiver.problems
    assert len(local) >= 2 and got == local  # every record, unchanged, in chain order
    assert_chain(got)
    first = receiver.messages[0]
    assert first.pri == 13 * 8 + 5 and first.app == "pve-steward" and first.msgid == "audit"
    assert first.sd.startswith(f'[pve-steward@32473 seq="1" hash="{local[0]["hash"]}" log="')


async def test_records_go_over_tls_verified_by_the_ca_file(
    demo_sim: SimServer, server_for: Any, tmp_path: Path
) -> None:
    cert, key, _ = make_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    receiver = SyslogReceiver(tls=context).start()
    try:
        settings = {"audit_syslog": f"tls://127.0.0.1:{receiver.port}", "audit_syslog_ca_file": cert}
        async with Client(server_for(demo_sim, **settings)) as c:
            await reads(c)
        local = local_records(tmp_path / "audit.jsonl")
        got = receiver.wait_for(len(local))
    finally:
        receiver.stop()
    assert not receiver.problems and got == local
    assert_chain(got)


async def test_a_receiver_that_is_down_gets_the_queue_first_and_in_order(
    demo_sim: SimServer, server_for: Any, tmp_path: Path
) -> None:
    port = free_port()  # nothing listens yet
    queue = tmp_path / "audit.jsonl.syslog-queue"
    async with Client(server_for(demo_sim, audit_syslog=f"tcp://127.0.0.1:{port}")) as c:
        await reads(c)
        waiting = local_records(tmp_path / "audit.jsonl")
        assert [json.loads(line) for line in queue.read_text().splitlines()] == waiting  # kept on disk
        receiver = SyslogReceiver(port=port).start()
        try:
            await reads(c)
            local = local_records(tmp_path / "audit.jsonl")
            got = receiver.wait_for(len(local))
        finally:
            receiver.stop()
    assert not receiver.problems
    assert got[: len(waiting)] == waiting and got == local  # the queued records first, then the new ones
    assert_chain(got)
    deadline = time.monotonic() + 10
    while queue.read_bytes() and time.monotonic() < deadline:  # the sender truncates right after its last send
        time.sleep(0.05)
    assert queue.read_bytes() == b""  # delivered: the queue starts afresh


async def test_required_delivery_refuses_a_write_while_the_receiver_is_down(
    start_sim: Any, server_for: Any, tmp_path: Path
) -> None:
    sim: SimServer = start_sim("demo")
    port = free_port()
    mcp = server_for(
        sim, "operator@pve!mcp", tier="operator", audit_syslog=f"tcp://127.0.0.1:{port}", audit_required=True
    )
    async with Client(mcp) as c:
        await c.call_tool("cluster_overview", {})  # the first call also reads PVE's version (checked on first use)
        requests_before = sim.sim.requests
        refused = await c.call_tool("guest_reboot", {"vmid": 104})
        requests_after = sim.sim.requests
        receiver = SyslogReceiver(port=port).start()
        try:
            # the sender reconnects after its backoff (up to 5 s): once it delivered the queue, the preview's
            # delivery check (3 s) waits only for a probe of the connection
            queued = len(local_records(tmp_path / "audit.jsonl"))
            assert len(receiver.wait_for(queued, timeout=60)) == queued
            preview = await c.call_tool("guest_reboot", {"vmid": 104})
            got = receiver.wait_for(len(local_records(tmp_path / "audit.jsonl")))
        finally:
            receiver.stop()
    assert refused.is_error
    text = refused.content[0].text  # type: ignore[union-attr]
    assert "audit delivery is required" in text and "nothing was sent to the cluster" in text
    assert requests_after == requests_before  # nothing reached PVE
    assert not preview.is_error and preview.structured_content["status"] == "preview"  # type: ignore[index]
    denial = [r for r in got if r.get("tool") == "guest_reboot" and r.get("outcome") == "refused"]
    assert len(denial) == 1 and "audit delivery is required" in denial[0]["reason"]
    assert_chain(got)


async def test_a_receiver_restart_loses_no_record(demo_sim: SimServer, server_for: Any, tmp_path: Path) -> None:
    first = SyslogReceiver().start()
    port = first.port
    async with Client(server_for(demo_sim, audit_syslog=f"tcp://127.0.0.1:{port}")) as c:
        await reads(c)
        before = first.wait_for(len(local_records(tmp_path / "audit.jsonl")))
        first.stop()  # closes its connections: the server must notice and reconnect
        await reads(c)
        second = SyslogReceiver(port=port).start()
        try:
            await reads(c)
            local = local_records(tmp_path / "audit.jsonl")
            after = second.wait_for(len(local) - len(before))
        finally:
            second.stop()
    assert not first.problems and not second.problems
    assert before + after == local  # every record once, in chain order, across the restart
    assert_chain(before + after)


async def test_audit_verify_checks_each_replicas_chain_in_the_forwarded_stream(
    demo_sim: SimServer, server_for: Any, tmp_path: Path
) -> None:
    """Two replicas forward to one receiver; `audit verify --forwarded` checks each chain in the stored stream
    and names the line where one was edited."""
    import subprocess
    import sys

    receiver = SyslogReceiver().start()
    target = f"tcp://127.0.0.1:{receiver.port}"
    try:
        for name in ("a", "b"):
            log = tmp_path / f"audit-{name}.jsonl"
            async with Client(server_for(demo_sim, audit_syslog=target, audit_log=log)) as c:
                await reads(c)
        expected = len(local_records(tmp_path / "audit-a.jsonl")) + len(local_records(tmp_path / "audit-b.jsonl"))
        receiver.wait_for(expected)
    finally:
        receiver.stop()
    stream = receiver.store(tmp_path / "received.log")

    def verify() -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pve_steward", "audit", "verify", "--forwarded", str(stream)]
        return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)

    ok = verify()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count(": OK,") == 2
    lines = stream.read_bytes().splitlines(keepends=True)
    lines[-1] = lines[-1].replace(b'"outcome":"', b'"outcome":"x')  # edit the last record of one replica
    stream.write_bytes(b"".join(lines))
    broken = verify()
    assert broken.returncode == 1
    assert f"BROKEN at line {len(lines)}: hash mismatch" in broken.stdout and ": OK," in broken.stdout
