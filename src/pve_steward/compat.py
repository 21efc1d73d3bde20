"""The Proxmox VE releases pve-steward supports, declared once.

The server reads ``/version`` at start and refuses to serve outside this range unless
``--disable-version-check`` is given (then it logs a warning). pvesim presents several releases
so the check is tested.
"""

from __future__ import annotations

import re

SUPPORTED_MIN = (8, 0)  # inclusive
SUPPORTED_MAX = (10, 0)  # exclusive
SUPPORTED_TEXT = "Proxmox VE >= 8.0 and < 10.0"


class UnsupportedVersion(RuntimeError):
    pass


def parse_release(version: str) -> tuple[int, int]:
    m = re.match(r"^\s*(\d+)\.(\d+)", version)
    if not m:
        raise UnsupportedVersion(f"cannot read the PVE version '{version}'")
    return int(m.group(1)), int(m.group(2))


def check_version(version: str) -> tuple[int, int]:
    release = parse_release(version)
    if not SUPPORTED_MIN <= release < SUPPORTED_MAX:
        raise UnsupportedVersion(
            f"Proxmox VE {version} is not supported (supported: {SUPPORTED_TEXT}). "
            "Upgrade pve-steward, or start with --disable-version-check at your own risk."
        )
    return release
