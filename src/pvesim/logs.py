"""The logs a PVE node keeps, as its API reads them: the journal (syslog, journal), the firewall log.

Reading follows pve-common PVE/Tools.pm: ``dump_logfile`` (task logs, the firewall log) numbers the lines it
keeps from 1 (``n``), counts every line its filter passes (the ``total`` the API sends beside the data), reads
to the end for ``limit`` 0, and answers one line 'no content' for an empty file; ``dump_journal`` (syslog) is
``journalctl -o short`` read the same way, except that a ``limit`` of 0 is 50.

What a node's journal holds is derived from the cluster: the boot, every task of the node (pvedaemon's
'starting task' and 'end task' lines), the cluster log's entries from the node, failed services, failing
replication jobs, plus a scenario's own lines (a node's ``journal``). The firewall log (pvefw-logger's
format) holds the logger's start and the scenario's ``firewall.log`` entries.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

Line = dict[str, Any]


def dump_logfile(lines: Iterable[str], start: int = 0, limit: int = 50, final: bool = True) -> tuple[int, list[Line]]:
    """pve-common PVE/Tools.pm dump_logfile_by_filehandle over lines its filter passed: (total, rows)."""
    rows: list[Line] = []
    count = 0
    until_end = limit == 0
    for text in lines:
        count += 1
        if count <= start:
            continue
        if not until_end:
            if limit <= 0:
                continue
            limit -= 1
        rows.append({"n": count, "t": text})
    if not count and final:  # 'ExtJS store.guaranteeRange() does not like empty array'
        return 1, [{"n": 1, "t": "no content"}]
    return count, rows


def dump_journal(lines: Iterable[str], start: int | None, limit: int | None) -> tuple[int, list[Line]]:
    """pve-common PVE/Tools.pm dump_journal: like dump_logfile, but ``limit`` 0 (or unset) is 50."""
    return dump_logfile(lines, start or 0, limit or 50)


@dataclass(frozen=True)
class Entry:
    """One journal entry: when, who (syslog identifier, pid), the unit it belongs to, priority, text."""

    time: float
    ident: str
    pid: int | None
    message: str
    unit: str | None = None
    priority: int = 6
    boot: int = 0  # 0: this boot, 1: the one before (journalctl prints '-- Boot <id> --' between)


def local(ts: float, zone: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, ZoneInfo(zone))


def short_line(e: Entry, host: str, zone: str) -> str:
    """journalctl ``-o short`` (and mini-journalreader): 'Dec 06 07:42:01 pve1 pvedaemon[1234]: text'."""
    pid = f"[{e.pid}]" if e.pid is not None else ""
    return f"{local(e.time, zone):%b %d %H:%M:%S} {host} {e.ident}{pid}: {e.message}"


def boot_id(host: str, boot: int) -> str:
    return hashlib.md5(f"{host}/{boot}".encode(), usedforsecurity=False).hexdigest()


def journal_lines(entries: list[Entry], host: str, zone: str) -> list[str]:
    """The entries as journalctl prints them, with its '-- Boot <id> --' line where a boot begins."""
    out: list[str] = []
    boot: int | None = None
    for e in entries:
        if boot is not None and e.boot != boot:
            out.append(f"-- Boot {boot_id(host, e.boot)} --")
        boot = e.boot
        out.append(short_line(e, host, zone))
    return out


def node_journal(cluster: Any, node: Any) -> list[Entry]:
    """Everything the node's journal holds, oldest first."""
    now = cluster.clock.now()
    booted = now - node.uptime
    entries = [*_boot(node, booted), *_tasks(cluster, node.name), *_cluster_log(cluster, node.name)]
    entries += _failed_services(node, booted)
    entries += _replication(cluster, node.name)
    for spec in node.journal:
        entries += _planted(spec, now)
    entries = [e if e.time >= booted else _before_boot(e) for e in entries if e.time <= now]
    entries.sort(key=lambda e: (-e.boot, e.time))
    return entries


def _before_boot(e: Entry) -> Entry:
    return Entry(e.time, e.ident, e.pid, e.message, e.unit, e.priority, boot=1)


def _boot(node: Any, booted: float) -> list[Entry]:
    kernel = node.kernel
    return [
        Entry(
            booted,
            "kernel",
            None,
            f"Linux version {kernel} (build@proxmox) #1 SMP PREEMPT_DYNAMIC PMX {kernel}",
            None,
            5,
        ),
        Entry(
            booted + 1,
            "kernel",
            None,
            f"Command line: BOOT_IMAGE=/boot/vmlinuz-{kernel} root=/dev/mapper/pve-root ro quiet",
            None,
            6,
        ),
        Entry(
            booted + 9,
            "systemd",
            1,
            "Starting pve-cluster.service - The Proxmox VE cluster filesystem...",
            "pve-cluster.service",
        ),
        Entry(
            booted + 10,
            "pmxcfs",
            1021,
            f"[main] notice: resolved node name '{node.name}' to '{node.ip}' for default node IP address",
            "pve-cluster.service",
            5,
        ),
        Entry(
            booted + 12,
            "systemd",
            1,
            "Started pve-cluster.service - The Proxmox VE cluster filesystem.",
            "pve-cluster.service",
        ),
        Entry(booted + 14, "pvedaemon", 1180, "starting server", "pvedaemon.service"),
        Entry(booted + 15, "pveproxy", 1190, "starting server", "pveproxy.service"),
        Entry(booted + 16, "systemd", 1, "Started pveproxy.service - PVE API Proxy Server.", "pveproxy.service"),
    ]


def _tasks(cluster: Any, node: str) -> list[Entry]:
    """pvedaemon's lines for every task (PVE::RESTEnvironment fork_worker logs its start and end)."""
    out: list[Entry] = []
    for t in cluster.tasks:
        if t.node != node:
            continue
        user = t.user.split("!", 1)[0]
        out.append(Entry(t.starttime, "pvedaemon", t.pid, f"<{user}> starting task {t.upid}", "pvedaemon.service"))
        if t.endtime is not None and t.status is not None:
            prio = 6 if t.status == "OK" else 3
            status = "OK" if t.status == "OK" else t.status
            out.append(
                Entry(t.endtime, "pvedaemon", t.pid, f"<{user}> end task {t.upid} {status}", "pvedaemon.service", prio)
            )
    return out


def _cluster_log(cluster: Any, node: str) -> list[Entry]:
    return [
        Entry(float(r["time"]), str(r["tag"]), int(r["pid"]), str(r["msg"]), f"{r['tag']}.service", int(r["pri"]))
        for r in cluster.cluster_log
        if r.get("node") == node and not str(r.get("msg", "")).startswith("<")  # task lines: _tasks has them
    ]


def _failed_services(node: Any, booted: float) -> list[Entry]:
    out: list[Entry] = []
    for name, (sub, _active, _unit) in sorted(node.health.services.items()):
        if sub == "failed":
            unit = "ssh.service" if name == "sshd" else f"{name}.service"
            when = booted + 30
            out.append(
                Entry(when, "systemd", 1, f"{unit}: Main process exited, code=exited, status=1/FAILURE", unit, 5)
            )
            out.append(Entry(when, "systemd", 1, f"{unit}: Failed with result 'exit-code'.", unit, 4))
    return out


def _replication(cluster: Any, node: str) -> list[Entry]:
    """pvescheduler runs pvesr; a failing job logs 'got unexpected replication job error' (PVE/API2/Replication.pm
    run_single_job logs through the task, ReplicationState record_job_end)."""
    out: list[Entry] = []
    for job in cluster.replication.values():
        guest = cluster.guests.get(job.guest)
        if guest is None or guest.node != node or not job.error or not job.last_try:
            continue
        out.append(
            Entry(
                float(job.last_try),
                "pvescheduler",
                4400,
                f"{job.id}: got unexpected replication job error - {job.error}",
                "pvescheduler.service",
                3,
            )
        )
    return out


def _planted(spec: dict[str, Any], now: float) -> list[Entry]:
    from pvesim.scenario import parse_age  # scenario imports this module's users

    when = now - parse_age(spec.get("age", "1h"))
    ident = str(spec.get("ident", "pvedaemon"))
    unit = spec.get("unit", None if ident == "kernel" else f"{ident}.service")
    pid = None if ident == "kernel" else int(spec.get("pid", 1000 + len(ident)))
    return [
        Entry(when + i, ident, pid, str(spec["msg"]), unit, int(spec.get("priority", 6)))
        for i in range(int(spec.get("count", 1)))
    ]


# ---------------------------------------------------------------- the firewall log


@dataclass(frozen=True)
class FwEvent:
    """One line of /var/log/pve-firewall.log, as pvefw-logger writes it."""

    time: float
    vmid: int  # 0: the host
    level: int
    chain: str
    text: str


def firewall_line(e: FwEvent, zone: str) -> str:
    """pvefw-logger.c: '<vmid> <loglevel> <chain> <%d/%b/%Y:%H:%M:%S %z> <prefix>IN=... OUT=... ...'."""
    return f"{e.vmid} {e.level} {e.chain} {local(e.time, zone):%d/%b/%Y:%H:%M:%S %z} {e.text}"


def firewall_events(cluster: Any, node: Any) -> list[FwEvent]:
    """The node's firewall log: the logger's start at boot, then the scenario's events for this node."""
    from pvesim.scenario import parse_age

    now = cluster.clock.now()
    out = [FwEvent(now - node.uptime + 20, 0, 5, "-", "starting pvefw logger")]
    for spec in cluster.firewall.log:
        if spec.get("node", node.name) != node.name:
            continue
        when = now - parse_age(spec.get("age", "1h"))
        for i in range(int(spec.get("count", 1))):
            out.append(_fw_event(spec, when + i * 7))
    return sorted((e for e in out if e.time <= now), key=lambda e: e.time)


_LEVELS = {"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warning": 4, "notice": 5, "info": 6, "debug": 7}


def _fw_event(spec: dict[str, Any], when: float) -> FwEvent:
    vmid = int(spec.get("vmid", 0))
    direction = str(spec.get("direction", "in")).upper()
    chain = str(spec.get("chain") or (f"tap{vmid}i0-{direction}" if vmid else f"PVEFW-HOST-{direction}"))
    action = str(spec.get("action", "DROP"))
    prefix = f"policy {action}: " if spec.get("policy", True) else f"{action}: "
    iface = f"fwbr{vmid}i0" if vmid else "vmbr0"
    proto = str(spec.get("proto", "tcp")).upper()
    ports = f"SPT={spec.get('sport', 51234)} DPT={spec.get('dport', 22)} " if proto in ("TCP", "UDP") else ""
    text = (
        f"{prefix}IN={iface} OUT={iface if vmid else ''} "
        + (f"PHYSIN=tap{vmid}i0 " if vmid else "")
        + f"MAC=bc:24:11:3a:10:00:00:00:5e:00:01:01:08:00 SRC={spec.get('src', '203.0.113.7')} "
        f"DST={spec.get('dst', '10.0.0.11')} LEN=60 TOS=0x00 PREC=0x00 TTL=52 ID=4242 DF PROTO={proto} {ports}"
    ).rstrip()
    return FwEvent(when, vmid, _LEVELS.get(str(spec.get("level", "info")), 6), chain, text)


def firewall_filter(since: int | None, until: int | None, vmid: int | None) -> Callable[[FwEvent], bool]:
    """pve-firewall PVE/Firewall/Helpers.pm dump_fw_logfile: a guest's lines begin with its vmid; since/until
    compare the line's own timestamp."""

    def keep(e: FwEvent) -> bool:
        if vmid is not None and e.vmid != vmid:
            return False
        if since and e.time < since:
            return False
        return not (until and e.time > until)

    return keep
