"""Cluster text inside our own sentences: one line, no control characters, quoted, length-capped.

Write previews, confirmation summaries and elicitation questions are sentences we compose; a guest
name placed in them verbatim could carry newlines, terminal escapes or bidirectional overrides
and pass for our words. Every cluster-supplied name goes into such a sentence through
:func:`quote_name`; whole sentences shown to a human go through :func:`one_line`.
"""

from __future__ import annotations

import unicodedata

NAME_LIMIT = 64
LINE_LIMIT = 300
# Control (Cc), format (Cf: bidi overrides, zero-width), surrogates, private use, unassigned, and
# line/paragraph separators: none belongs in a one-line name.
_DROPPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _clean(text: str) -> str:
    kept = (" " if unicodedata.category(c) in _DROPPED and c.isspace() else c for c in text)
    no_controls = "".join(c for c in kept if unicodedata.category(c) not in _DROPPED)
    return " ".join(no_controls.split())


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: object, limit: int = LINE_LIMIT) -> str:
    """``text`` as one line without control characters, at most ``limit`` characters."""
    return _cap(_clean(str(text)), limit)


def quote_name(name: object, limit: int = NAME_LIMIT) -> str:
    """A cluster-supplied name for a sentence: cleaned, capped, single quotes inside replaced, quoted."""
    if name is None or name == "":
        return "(no name)"
    return "'" + _cap(_clean(str(name)).replace("'", "\u2019"), limit) + "'"
