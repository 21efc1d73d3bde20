"""Guest config helpers for pvesim: property strings, volumes, sizes, digests.

pvesim keeps guest configs the way PVE does (ordered ``key: value`` strings) and parses them
on demand, so scenarios stay in PVE's own notation. This is deliberately independent of the
server's parser: the simulator must not share code with what it tests.
"""

from __future__ import annotations

import functools
import hashlib
import re

QEMU_DISK_KEY = re.compile(
    r"^(ide[0-3]|sata[0-5]|scsi(?:[12]?[0-9]|30)|virtio(?:1[0-5]|[0-9])|efidisk0|tpmstate0|unused\d+)$"
)
LXC_VOLUME_KEY = re.compile(r"^(rootfs|mp\d+|unused\d+)$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


@functools.lru_cache(maxsize=4096)  # pure; /cluster/resources asks it of every guest on every call
def parse_size(text: str) -> int:
    """'32G' -> bytes (PVE's disk size notation)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise ValueError(f"invalid size '{text}'")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(size: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if size % _UNITS[unit] == 0 and size >= _UNITS[unit]:
            return f"{size // _UNITS[unit]}{unit}"
    return str(size)


def parse_property_string(value: str, default_key: str | None = None) -> dict[str, str]:
    """Split ``a,b=c,d=e`` into a dict; the first bare item goes to ``default_key``."""
    out: dict[str, str] = {}
    for i, part in enumerate(value.split(",")):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
        elif i == 0 and default_key:
            out[default_key] = part.strip()
        else:
            out[part.strip()] = "1"
    return out


def volume_of(key: str, value: str, guest_type: str) -> tuple[str, dict[str, str]] | None:
    """(volid, options) for a config key holding a volume, else None."""
    pattern = QEMU_DISK_KEY if guest_type == "qemu" else LXC_VOLUME_KEY
    if not pattern.match(key):
        return None
    default = "file" if guest_type == "qemu" else "volume"
    opts = parse_property_string(value, default)
    volid = opts.pop(default, opts.pop("file", None))
    if volid is None:
        return None
    return volid, opts


def storage_of(volid: str) -> str | None:
    """'local-lvm:vm-100-disk-0' -> 'local-lvm'; host paths and 'none'/'cdrom' -> None."""
    if volid.startswith("/") or ":" not in volid:
        return None
    return volid.split(":", 1)[0]


def config_text(config: dict[str, str]) -> str:
    """Render a config the way PVE writes it (description lines become '#' comments)."""
    lines: list[str] = []
    desc = config.get("description")
    if desc:
        lines.extend("#" + line for line in desc.split("\n"))
    for key, value in config.items():
        if key == "description":
            continue
        lines.append(f"{key}: {value}")
    return "\n".join(lines) + "\n"


def digest(
    config: dict[str, str], snapshots: dict[str, dict[str, str]] | None = None, pending: dict[str, str] | None = None
) -> str:
    """SHA1 over the whole config file text, as PVE computes ``digest`` ([PENDING] before the snapshots)."""
    text = config_text(config)
    if pending:
        text += "\n[PENDING]\n" + config_text(pending)
    for name, snap in sorted((snapshots or {}).items()):
        text += f"\n[{name}]\n" + config_text(snap)
    return hashlib.sha1(text.encode()).hexdigest()
