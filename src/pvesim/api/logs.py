"""The logs a node keeps, read through the API: syslog and journal (pve-manager PVE/API2/Nodes.pm), task logs
(PVE/API2/Tasks.pm read_task_log), the firewall log of the host and of each guest (pve-firewall
API2/Firewall/Host.pm and VM.pm ``log``). Every reader answers ``total`` beside its lines."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from zoneinfo import ZoneInfo

from pvesim import logs
from pvesim.api.registry import ApiError, Call, Download, Result, route
from pvesim.state import Node, Task

# pve-manager PVE/API2/Nodes.pm syslog: the service names the GUI sends, as journalctl knows their units
_SERVICE_ALIASES = {"postfix": "postfix@-", "sshd": "ssh"}


def _node(call: Call) -> Node:
    return call.cluster.nodes[call.params["node"]]


def _journal_time(text: str, zone: str) -> float:
    """journalctl --since/--until 'YYYY-MM-DD[ HH:MM[:SS]]' in the node's local time."""
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(text, fmt).replace(tzinfo=ZoneInfo(zone)).timestamp()
        except ValueError:
            continue
    raise ApiError(500, f"command 'journalctl -o short --no-pager --since {text}' failed: exit code 1")


@route("GET", "/nodes/{node}/syslog")
def syslog(call: Call) -> Result:
    """Nodes.pm syslog: ``dump_journal`` (journalctl -o short) from the oldest entry, since/until in local
    time, ``service`` as journalctl's --unit."""
    n = _node(call)
    zone = n.health.timezone
    entries = logs.node_journal(call.cluster, n)
    p = call.params
    if "since" in p:
        since = _journal_time(str(p["since"]), zone)
        entries = [e for e in entries if e.time >= since]
    if "until" in p:
        until = _journal_time(str(p["until"]), zone)
        entries = [e for e in entries if e.time <= until]
    if p.get("service"):
        service = _SERVICE_ALIASES.get(str(p["service"]), str(p["service"]))
        unit = service if "." in service else f"{service}.service"
        entries = [e for e in entries if e.unit == unit]
    total, rows = logs.dump_journal(logs.journal_lines(entries, n.name, zone), p.get("start"), p.get("limit"))
    return Result(rows, total=total)


def _cursor(host: str, index: int, entry: logs.Entry) -> str:
    """A journald cursor: 's=<seqnum id>;i=<seqnum>;b=<boot id>;m=<monotonic>;t=<realtime usec>;x=<xor hash>'."""
    seq = hashlib.md5(host.encode(), usedforsecurity=False).hexdigest()
    usec = int(entry.time * 1_000_000)
    xor = hashlib.md5(f"{host}{index}".encode(), usedforsecurity=False).hexdigest()[:16]
    return f"s={seq};i={index + 1:x};b={logs.boot_id(host, entry.boot)};m={usec % 10**9:x};t={usec:x};x={xor}"


def _cursor_index(cursor: str) -> int | None:
    for part in cursor.split(";"):
        if part.startswith("i="):
            try:
                return int(part[2:], 16) - 1
            except ValueError:
                return None
    return None


@route("GET", "/nodes/{node}/journal")
def journal(call: Call) -> Download:
    """Nodes.pm journal: mini-journalreader -j, gzipped: ``{"data": [<first cursor>, lines..., <last cursor>],
    "success": 1}``; -n the last entries, -b/-e epoch bounds, -f/-t cursors (the start cursor's own entry is
    skipped); a '-- Reboot --' line where the boot changes."""
    n = _node(call)
    p = call.params
    entries = logs.node_journal(call.cluster, n)
    indexed = list(enumerate(entries))
    if p.get("lastentries") and (p.get("since") or p.get("startcursor")):
        raise ApiError(500, "command '/usr/bin/mini-journalreader -j' failed: exit code 1")
    if p.get("since"):
        indexed = [(i, e) for i, e in indexed if e.time >= int(p["since"])]
    if p.get("startcursor"):
        first = _cursor_index(str(p["startcursor"]))
        indexed = [(i, e) for i, e in indexed if first is not None and i > first]
    if p.get("until"):
        indexed = [(i, e) for i, e in indexed if e.time < int(p["until"])]
    if p.get("endcursor"):
        last = _cursor_index(str(p["endcursor"]))
        indexed = [(i, e) for i, e in indexed if last is not None and i < last]
    if p.get("lastentries"):
        indexed = indexed[-int(p["lastentries"]) :]
    data: list[str] = []
    boot: int | None = None
    for i, e in indexed:
        if not data:
            data.append(_cursor(n.name, i, e))
        if boot is not None and e.boot != boot:
            data.append("-- Reboot --")
        boot = e.boot
        data.append(logs.short_line(e, n.name, n.health.timezone))
    if indexed:
        data.append(_cursor(n.name, *indexed[-1]))
    elif entries:
        data.append(_cursor(n.name, len(entries) - 1, entries[-1]))
    body = json.dumps({"data": data, "success": 1}, separators=(",", ":")).encode()
    return Download(gzip.compress(body, mtime=0), "application/json", (("content-encoding", "gzip"),))


# ---------------------------------------------------------------- task logs


def task_log(call: Call, t: Task) -> Result | Download:
    """Tasks.pm read_task_log: ``dump_logfile`` of the task's file, or the file itself with ``download``
    (gzipped beyond 1024 bytes)."""
    p = call.params
    if call.flag("download"):
        if "start" in p or "limit" in p:
            raise ApiError(500, "'download' cannot be used together with 'start' or 'limit' parameters")
        text = "".join(line + "\n" for line in t.log).encode()
        stamp = dt.datetime.fromtimestamp(t.starttime, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        headers = [("content-disposition", f'attachment; filename="task-{t.node}-{t.type}-{stamp}.log"')]
        if len(text) > 1024:
            text = gzip.compress(text, mtime=0)
            headers.append(("content-encoding", "gzip"))
        return Download(text, "text/plain", tuple(headers))
    total, rows = logs.dump_logfile(t.log, int(p.get("start", 0)), int(p.get("limit", 50)))
    return Result(rows, total=total)


# ---------------------------------------------------------------- firewall logs


def _firewall_log(call: Call, vmid: int | None) -> Result:
    n = _node(call)
    p = call.params
    keep = logs.firewall_filter(p.get("since"), p.get("until"), vmid)
    lines = [logs.firewall_line(e, n.health.timezone) for e in logs.firewall_events(call.cluster, n) if keep(e)]
    total, rows = logs.dump_logfile(lines, int(p.get("start") or 0), int(p["limit"]) if "limit" in p else 50)
    return Result(rows, total=total)


@route("GET", "/nodes/{node}/firewall/log")
def node_firewall_log(call: Call) -> Result:
    """pve-firewall API2/Firewall/Host.pm log: /var/log/pve-firewall.log through dump_fw_logfile."""
    return _firewall_log(call, None)


@route("GET", "/nodes/{node}/qemu/{vmid}/firewall/log")
def qemu_firewall_log(call: Call) -> Result:
    """API2/Firewall/VM.pm log: the node's firewall log, only lines that begin with the guest's vmid (the guest
    need not exist: the handler reads no config)."""
    return _firewall_log(call, int(call.params["vmid"]))


@route("GET", "/nodes/{node}/lxc/{vmid}/firewall/log")
def lxc_firewall_log(call: Call) -> Result:
    return _firewall_log(call, int(call.params["vmid"]))
