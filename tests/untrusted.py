"""Read tool output the way the code sees it: marked cluster text unwrapped to its plain string."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    """``{"untrusted": true, "text": t}`` becomes ``t``, recursively; everything else is unchanged."""
    if isinstance(value, dict):
        if value.get("untrusted") is True and set(value) == {"untrusted", "text"}:
            return value["text"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
