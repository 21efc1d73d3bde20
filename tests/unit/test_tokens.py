"""Confirmation tokens: every way to misuse one is refused with a message that says why."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from pve_steward.security.tokens import TokenRefused, TokenSigner

KEY = b"k" * 32
PARAMS = {"vmid": 100, "timeout": 180}
TARGET = {"vmid": 100, "node": "pve1", "type": "qemu", "name": "web01"}
NOW = 1_800_000_000.0


def _issue(signer: TokenSigner | None = None) -> tuple[TokenSigner, str]:
    signer = signer or TokenSigner(KEY, ttl=300)
    return signer, signer.issue("guest_shutdown", PARAMS, TARGET, "state-1", NOW, summary="shut down VM 100")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _payload(token: str) -> dict[str, Any]:
    body = token.split(".", maxsplit=1)[0]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))  # type: ignore[no-any-return]


def _with_payload(token: str, payload: dict[str, Any]) -> str:
    """Re-encode a modified payload but keep the original signature (what an attacker can do)."""
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return f"{_b64(body)}.{token.split('.')[1]}"


@pytest.mark.anyio
async def test_a_valid_token_is_accepted_once() -> None:
    signer, token = _issue()
    payload = await signer.check(token, "guest_shutdown", PARAMS, NOW + 10)
    signer.check_target(payload, TARGET, "state-1")
    await signer.consume(payload)
    with pytest.raises(TokenRefused, match="already used"):
        await signer.check(token, "guest_shutdown", PARAMS, NOW + 11)
    with pytest.raises(TokenRefused, match="already used"):
        await signer.consume(payload)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("op", "guest_stop"),
        ("p", {"vmid": 100, "timeout": 10}),
        ("t", {**TARGET, "node": "pve2"}),
        ("s", "state-2"),
        ("iat", int(NOW) + 1000),
        ("exp", int(NOW) + 99_999),
        ("n", "0000000000000000"),
        ("sum", "something harmless"),
        ("v", 2),
    ],
)
def test_tampering_with_any_field_is_detected(field: str, value: Any) -> None:
    signer, token = _issue()
    forged = _with_payload(token, {**_payload(token), field: value})
    with pytest.raises(TokenRefused, match="altered or was issued by another server key"):
        signer.verify(forged, "guest_shutdown", PARAMS, NOW + 1)
    assert signer.peek(forged) is None


def test_tampered_signature_and_garbage_are_refused() -> None:
    signer, token = _issue()
    body, mac = token.split(".")
    flipped = mac[:-2] + ("A" if mac[-2] != "A" else "B") + mac[-1]
    with pytest.raises(TokenRefused, match="altered"):
        signer.verify(f"{body}.{flipped}", "guest_shutdown", PARAMS, NOW)
    for junk in ("", "abc", "a.b.c", "!!!.???"):
        with pytest.raises(TokenRefused):
            signer.verify(junk, "guest_shutdown", PARAMS, NOW)


def test_token_from_another_key_is_refused() -> None:
    _, token = _issue(TokenSigner(b"o" * 32))
    with pytest.raises(TokenRefused, match="another server key"):
        TokenSigner(KEY).verify(token, "guest_shutdown", PARAMS, NOW)


def test_replicas_sharing_the_key_accept_each_others_tokens() -> None:
    _, token = _issue(TokenSigner(KEY))
    payload = TokenSigner(KEY).verify(token, "guest_shutdown", PARAMS, NOW)
    TokenSigner.check_target(payload, TARGET, "state-1")


def test_expiry_uses_the_injected_clock() -> None:
    signer, token = _issue()
    signer.verify(token, "guest_shutdown", PARAMS, NOW + 300)
    with pytest.raises(TokenRefused, match=r"expired \(300s lifetime\)"):
        signer.verify(token, "guest_shutdown", PARAMS, NOW + 301)


def test_other_operation_is_refused() -> None:
    signer, token = _issue()
    with pytest.raises(TokenRefused, match="issued for 'guest_shutdown', not 'guest_stop'"):
        signer.verify(token, "guest_stop", PARAMS, NOW)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"vmid": 101, "timeout": 180}, "vmid"),
        ({"vmid": 100, "timeout": 30}, "timeout"),
        ({"vmid": 100}, "timeout"),
        ({**PARAMS, "force": True}, "force"),
    ],
)
def test_swapped_or_added_parameter_is_refused_and_named(params: dict[str, Any], named: str) -> None:
    signer, token = _issue()
    with pytest.raises(TokenRefused, match=rf"parameters differ from the preview \({named}\)"):
        signer.verify(token, "guest_shutdown", params, NOW)


def test_target_moved_since_preview_is_refused() -> None:
    signer, token = _issue()
    payload = signer.verify(token, "guest_shutdown", PARAMS, NOW)
    with pytest.raises(TokenRefused, match="target changed since the preview"):
        signer.check_target(payload, {**TARGET, "node": "pve3"}, "state-1")


def test_state_fingerprint_change_is_refused() -> None:
    signer, token = _issue()
    payload = signer.verify(token, "guest_shutdown", PARAMS, NOW)
    with pytest.raises(TokenRefused, match="state changed since the preview"):
        signer.check_target(payload, TARGET, "state-2")


def test_short_keys_and_unreadable_key_files_are_rejected(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        TokenSigner(b"short")
    with pytest.raises(ValueError, match="cannot read confirm_key_file"):
        TokenSigner.from_file(tmp_path / "missing", 60)
    (tmp_path / "key").write_bytes(KEY + b"\n")
    _, token = _issue(TokenSigner.from_file(tmp_path / "key", 300))
    TokenSigner(KEY).verify(token, "guest_shutdown", PARAMS, NOW)


def test_derived_keys_are_shared_by_replicas_and_separate_from_the_token_key() -> None:
    a, b, other = TokenSigner(KEY), TokenSigner(KEY), TokenSigner(b"o" * 32)
    assert a.derived_key("request-state") == b.derived_key("request-state") != other.derived_key("request-state")
    assert a.derived_key("request-state") != a.derived_key("something-else")
    assert KEY not in a.derived_key("request-state") and len(a.derived_key("request-state")) == 32


def _respell(text: str) -> list[str]:
    """Other base64 spellings of the same bytes: padding, the standard alphabet, set unused low bits."""
    import string

    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    spellings = [text + "=" * (-len(text) % 4)] if len(text) % 4 else []
    if len(text) % 4 in (2, 3):  # the last character carries unused bits: setting one decodes to the same bytes
        last = alphabet.index(text[-1])
        spellings.append(text[:-1] + alphabet[last | 1])
    return [s for s in spellings if s != text]


def test_non_canonical_base64_spellings_are_refused() -> None:
    signer, token = _issue()
    body, mac = token.split(".")
    variants = [f"{v}.{mac}" for v in _respell(body)] + [f"{body}.{v}" for v in _respell(mac)]
    assert variants, "the token's parts must have a respellable length for this test to mean anything"
    for variant in variants:
        assert base64.urlsafe_b64decode(variant.split(".")[0] + "==") == base64.urlsafe_b64decode(body + "==")
        with pytest.raises(TokenRefused, match="malformed"):
            signer.verify(variant, "guest_shutdown", PARAMS, NOW)
    signer.verify(token, "guest_shutdown", PARAMS, NOW)  # the canonical one still works


def test_token_is_bound_to_the_cluster_and_the_principal() -> None:
    from pve_steward.security.tokens import binding_of

    here = binding_of("pve1:8006|ops@pve!mcp", "alice")
    signer = TokenSigner(KEY)
    token = signer.issue("guest_shutdown", PARAMS, TARGET, "state-1", NOW, binding=here)
    signer.verify(token, "guest_shutdown", PARAMS, NOW, binding=here)
    for other, what in (
        (binding_of("pve9:8006|ops@pve!mcp", "alice"), "another cluster"),
        (binding_of("pve1:8006|root@pam!all", "alice"), "another cluster or PVE API token"),
        (binding_of("pve1:8006|ops@pve!mcp", "mallory"), "another authenticated principal"),
        (binding_of("pve1:8006|ops@pve!mcp", None), "another authenticated principal"),
    ):
        with pytest.raises(TokenRefused, match=what):
            signer.verify(token, "guest_shutdown", PARAMS, NOW, binding=other)


def test_a_binary_key_file_keeps_every_byte(tmp_path: Path) -> None:
    """`head -c 32 /dev/urandom` may begin or end with a space or newline byte: those are part of the key
    (stripping them left 30-31 bytes and a refused start, or a key that differs between replicas)."""
    binary = b"\n" + bytes(range(1, 31)) + b" "
    (tmp_path / "bin").write_bytes(binary)
    (tmp_path / "text").write_text("  " + "ab" * 20 + "\n")
    signer = TokenSigner.from_file(tmp_path / "bin", 300)
    assert signer.derived_key("x") == TokenSigner(binary).derived_key("x")
    assert TokenSigner.from_file(tmp_path / "text", 300).derived_key("x") == TokenSigner(b"ab" * 20).derived_key("x")
