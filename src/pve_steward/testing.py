"""An in-memory :class:`~pve_steward.pveio.client.ProxmoxClient` for tool unit tests.

Answers are looked up by method and path (templates like ``/nodes/{node}/qemu`` match any
segment value); an answer may be data, an exception to raise, or a callable of the params.
Every call is recorded, so tests can assert what was (and was not) requested.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pve_steward.errors import PveNotFound
from pve_steward.pve.visibility import DEFAULT_PATHS
from pve_steward.pveio.client import ApiPath, WriteMethod


@dataclass
class FakeClient:
    answers: dict[str, Any] = field(default_factory=dict)  # "GET /cluster/resources" -> data
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def on(self, method: str, path: str, answer: Any) -> FakeClient:
        self.answers[f"{method} {path}"] = answer
        return self

    def _answer(self, method: str, path: ApiPath, params: dict[str, Any]) -> Any:
        self.calls.append((method, str(path), params))
        key = f"{method} {path}"
        answer = self.answers.get(key, _MISSING)
        if answer is _MISSING:
            for pattern, value in self.answers.items():
                rx = "^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(pattern)) + "$"
                if re.match(rx, key):
                    answer = value
                    break
        if answer is _MISSING and key in _AS_ROOT:
            answer = _AS_ROOT[key]
        if answer is _MISSING:
            raise PveNotFound(f"{key}: no fake answer", status=501, path=str(path))
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(params)
        return answer

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        return self._answer("GET", path, params)

    async def call(self, method: WriteMethod, path: ApiPath, /, **params: Any) -> Any:
        return self._answer(method, path, params)

    def requested(self, method: str | None = None) -> list[str]:
        return [f"{m} {p}" for m, p, _ in self.calls if method is None or m == method]


_MISSING: Callable[[], None] = object  # type: ignore[assignment]

# Unless a test says otherwise, the fake token sees what root@pam sees: every privilege on every path the
# privilege map always answers for, and an ACL tree without entries (pve/visibility.py).
_EVERY = dict.fromkeys(
    (
        "Sys.Audit", "Sys.Syslog", "Sys.Modify", "Sys.Console", "VM.Audit", "VM.Backup", "VM.Migrate",
        "Datastore.Audit", "Datastore.AllocateSpace", "Datastore.Allocate", "Pool.Audit", "SDN.Audit",
        "Mapping.Audit", "User.Modify", "Group.Allocate", "Permissions.Modify",
    ),
    1,
)  # fmt: skip
_AS_ROOT: dict[str, Any] = {
    "GET /access/permissions": {p: dict(_EVERY) for p in DEFAULT_PATHS},
    "GET /access/acl": [],
}
