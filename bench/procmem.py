"""Resident memory of a server and the processes it started (the diagnostics process, worker/).

A server that serves HTTP runs its heavy diagnostics in a child process; its memory is the sum of
both, or the bench would report the front end alone and flatter it.
"""

from __future__ import annotations

from pathlib import Path


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` alone, in KiB (0 once it has ended)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and of every process below it, in KiB."""
    return rss_kib(pid) + sum(tree_rss_kib(kid) for kid in _children(pid))
