"""A server built without a cluster (a fake client, no version check), for tests of what it registers: tools,
meta-tools and prompts, and which of them servers of one process share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pve_steward.config import Settings
from pve_steward.server import build_server
from pve_steward.testing import FakeClient


def registered_server(tmp_path: Path, **settings: Any) -> Any:
    """``settings`` over an operator-tier default."""
    return build_server(
        Settings(audit_log=tmp_path / "audit.jsonl", **({"tier": "operator"} | settings)),
        client=FakeClient({}),
        check_version_on_start=False,
    )
