"""A local OIDC issuer for tests: real RSA and EC keys made here, the discovery document and the JWKS served over
HTTP on loopback. Keys can be published and withdrawn, the JWKS endpoint can be made to hang, and it counts
how often the JWKS was fetched."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.httpserver import free_port

AUDIENCE = "pve-steward-tests"
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def _public_jwk(key: PrivateKey) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPrivateKey):
        return dict(json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())))
    return dict(json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key())))


class Issuer:
    """Keys by kid (RSA ``k1`` from the start); the JWKS lists the published ones."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.keys: dict[str, PrivateKey] = {}
        self.published: list[str] = []
        self.fetches = 0
        self.failing = False  # True: /jwks answers 503
        self.hanging = threading.Event()  # set: /jwks answers only once `released` is set (or after 60 s)
        self.released = threading.Event()
        self.add_key("k1")

    def add_key(self, kid: str, kind: str = "RSA", publish: bool = True) -> None:
        self.keys[kid] = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if kind == "RSA"
            else ec.generate_private_key(ec.SECP256R1())
        )
        if publish:
            self.published.append(kid)

    def withdraw(self, kid: str) -> None:
        self.published.remove(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            key = self.keys[kid]
            alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
            keys.append({**_public_jwk(key), "kid": kid, "use": "sig", "alg": alg})
        return {"keys": keys}

    def token(
        self, sub: str, groups: list[str] | None = None, *, kid: str = "k1", alg: str | None = None, **over: Any
    ) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, "groups": groups or []}
        claims.update(over)
        key = self.keys[kid]
        chosen = alg or ("RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256")
        return jwt.encode(claims, key, algorithm=chosen, headers={"kid": kid})  # the key object: no PEM reload

    def document(self, path: str) -> dict[str, Any] | None:
        if path == "/.well-known/openid-configuration":
            return {"issuer": self.url, "jwks_uri": f"{self.url}/jwks"}
        if path == "/jwks":
            self.fetches += 1
            if self.hanging.is_set():
                self.released.wait(60)
            return self.jwks()
        return None

    @contextmanager
    def serving(self) -> Iterator[Issuer]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = issuer.document(self.path)
                body = json.dumps(found or {}).encode()
                failing = issuer.failing and self.path == "/jwks"
                self.send_response(503 if failing else 200 if found is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.released.set()
            server.shutdown()
            server.server_close()
