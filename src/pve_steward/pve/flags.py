"""PVE's booleans as its API writes them: 1/0 mostly, sometimes "1"/"0", a JSON true, or on/off, yes/no."""

from __future__ import annotations

from typing import Any


def flag(value: Any) -> bool:
    """A PVE boolean (pve-common JSONSchema parse_boolean: 1, true, yes, on); anything else is false."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")
