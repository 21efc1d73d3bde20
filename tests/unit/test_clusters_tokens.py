"""Confirmation tokens name the configured cluster they were issued for; without cluster tables they are as before."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pve_steward.security.tokens import TokenRefused, TokenSigner, binding_of

KEY = b"k" * 32
PARAMS = {"vmid": 100}
TARGET = {"vmid": 100, "node": "pve1", "type": "qemu"}
NOW = 1_800_000_000.0
SAME = "pve1:8006|ops@pve!mcp"  # two names for one address: only the name tells them apart


def _payload(token: str) -> dict[str, Any]:
    body = token.split(".", maxsplit=1)[0]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))  # type: ignore[no-any-return]


def _issue(binding: dict[str, str | None]) -> tuple[TokenSigner, str]:
    signer = TokenSigner(KEY)
    return signer, signer.issue("guest_start", PARAMS, TARGET, "s", NOW, binding=binding)


def test_a_token_names_its_cluster_and_is_refused_on_another() -> None:
    signer, token = _issue(binding_of(SAME, None, "prod"))
    assert _payload(token)["cn"] == "prod"
    signer.verify(token, "guest_start", PARAMS, NOW, binding=binding_of(SAME, None, "prod"))
    with pytest.raises(
        TokenRefused, match="issued for cluster 'prod', not cluster 'lab'; preview again on cluster 'lab'"
    ):
        signer.verify(token, "guest_start", PARAMS, NOW, binding=binding_of(SAME, None, "lab"))


def test_without_cluster_tables_the_token_format_is_unchanged() -> None:
    assert binding_of(SAME, None) == {"cl": binding_of(SAME, None, "prod")["cl"], "pr": None}
    signer, token = _issue(binding_of(SAME, None))
    assert "cn" not in _payload(token)
    signer.verify(token, "guest_start", PARAMS, NOW, binding=binding_of(SAME, None))


def test_tokens_do_not_cross_between_named_and_unnamed_clusters() -> None:
    signer, plain = _issue(binding_of(SAME, None))
    with pytest.raises(TokenRefused, match="issued for a server without named clusters, not cluster 'prod'"):
        signer.verify(plain, "guest_start", PARAMS, NOW, binding=binding_of(SAME, None, "prod"))
    signer, named = _issue(binding_of(SAME, None, "prod"))
    with pytest.raises(TokenRefused, match="issued for cluster 'prod', not this server"):
        signer.verify(named, "guest_start", PARAMS, NOW, binding=binding_of(SAME, None))
