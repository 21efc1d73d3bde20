"""The tool list a configuration answered, kept so the next start answers `tools/list` before building it.

Building the tools means importing every tool and analysis module and deriving schemas from the
handlers' signatures: about 250 ms and 10 MiB of a start whose bare SDK share is about 560 ms
(issue 17). A stdio client starts the server for every session, so `serve` keeps what `tools/list`
answered beside the audit log; a later start with the same fingerprint answers `tools/list` from it and
builds the tools on the first request that needs them (design record 261203-28).

The fingerprint covers everything the list is derived from: this package's files (name, size, mtime),
a custom tools file, the Python, SDK and pydantic versions, and every setting (secrets masked: they
never decide the list and never reach the file). Anything unreadable or different is a miss, and a miss
only costs the full build.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pydantic
from mcp.types import Tool as MCPTool

from pve_steward import __version__
from pve_steward.config import Settings

log = logging.getLogger(__name__)
KEEP = 4  # configurations kept side by side (e.g. a read-only and an admin entry of one client)
_PACKAGE = Path(__file__).resolve().parent.parent  # the whole package: any module may change the tools


@dataclass(frozen=True)
class Surface:
    """What a start needs before the tools are built: the listed tools, and whether any of them writes."""

    tools: list[MCPTool]
    writes: bool


def _sdk_version() -> str:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version("mcp")
    return "unknown"


def _tree_state(root: Path) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            st = os.stat(os.path.join(folder, name))
            out.append((os.path.relpath(os.path.join(folder, name), root), st.st_size, st.st_mtime_ns))
    return out


def fingerprint(settings: Settings) -> str:
    """A digest of everything the tool list is derived from (see the module docstring)."""
    tools_file = settings.tools_file
    tools_stat = tools_file.stat() if tools_file is not None and tools_file.exists() else None
    parts: dict[str, Any] = {
        "version": __version__,
        "python": list(sys.version_info[:3]),
        "mcp": _sdk_version(),
        "pydantic": pydantic.VERSION,
        "package": _tree_state(_PACKAGE),
        "tools_file": (str(tools_file), tools_stat.st_size, tools_stat.st_mtime_ns) if tools_stat else str(tools_file),
        "settings": settings.model_dump(mode="json"),  # SecretStr fields dump as "**********"
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def surface_file(folder: Path, digest: str) -> Path:
    """Where the surface of one configuration is kept: one file per fingerprint."""
    return folder / f"surface-{digest[:32]}.json"


def read_surface(folder: Path, digest: str) -> Surface | None:
    """The surface kept for this fingerprint, or None (none kept, another configuration, unreadable)."""
    try:
        kept = json.loads(surface_file(folder, digest).read_text(encoding="utf-8"))
        if kept.get("fingerprint") != digest:
            return None
        return Surface([MCPTool.model_validate(t) for t in kept["tools"]], bool(kept["writes"]))
    except (OSError, ValueError, KeyError, TypeError, pydantic.ValidationError) as exc:
        log.debug("no kept tool list in %s: %s", folder, exc)
        return None


def write_surface(folder: Path, digest: str, surface: Surface) -> None:
    """Keep the surface for the next start (private file, replaced atomically); a failure is only logged."""
    body = {
        "fingerprint": digest,
        "writes": surface.writes,
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in surface.tools],
    }
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".surface-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(body, out, separators=(",", ":"))
        os.replace(tmp, surface_file(folder, digest))
    except OSError as exc:
        log.info("could not keep the tool list in %s for the next start: %s", folder, exc)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return
    _prune(folder)


def _prune(folder: Path) -> None:
    """Keep the ``KEEP`` most recently written surfaces: each upgrade or edited setting leaves one behind."""
    with contextlib.suppress(OSError):
        kept = sorted(folder.glob("surface-*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for stale in kept[KEEP:]:
            stale.unlink(missing_ok=True)


def forget_surface(folder: Path, digest: str) -> None:
    """Remove a kept surface that proved wrong; the next start builds and keeps a new one."""
    with contextlib.suppress(OSError):
        surface_file(folder, digest).unlink()
