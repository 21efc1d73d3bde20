"""Answer bodies: encoded by orjson where it is installed (a dependency; some platforms lack its wheel), else by the
standard library.

The simulator serves every request from one event loop, and encoding a large answer held it: 8-10 ms
for the 664 KB ``/cluster/resources`` of 2,000 guests, which every request behind it waited for, where a
PVE node answers with several workers side by side (issue 17, design record 261204-41). orjson writes
the same JSON (compact, UTF-8, keys in order; a float may be spelt differently, 1e-5 for 1e-05)
in about a tenth of that.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from starlette.responses import JSONResponse

_orjson: ModuleType | None
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the dev extra installs it
    _orjson = None


class DataResponse(JSONResponse):
    """A JSON answer: the same values whichever encoder wrote it (floats may be spelt differently: 1e-5)."""

    def render(self, content: Any) -> bytes:
        if _orjson is not None:
            try:
                body: bytes = _orjson.dumps(content, option=_orjson.OPT_NON_STR_KEYS)
                return body
            except TypeError:  # what orjson refuses (an int past 64 bits): the standard encoder decides
                pass
        return super().render(content)
