"""The HTTPS transport under proxmoxer's session: libcurl (pycurl), used only by client.py.

Why: at 2,000 guests a health check makes ~3,000 reads. Through requests' urllib3 adapter each
read cost ~0.45 ms of Python CPU (http.client, ssl, header parsing), all of it holding the GIL, so
a cheap call beside heavy diagnostics waited for the reads' Python (issue 17, 261203-32). libcurl
does the connection, TLS and parsing in C with the GIL released: ~0.05 ms of Python per read.

proxmoxer still builds every request (URL, token auth, parameters) and reads every answer: this is
a requests transport adapter (``requests.adapters.BaseAdapter``), so requests' exception types carry
the failures to client.map_error, worded as urllib3 words them.

TLS follows the session's choice exactly:
- ``verify=True``: certifi's CA bundle, as requests uses it, host name checked;
- ``verify=<file>``: that CA file, host name checked;
- a pinned fingerprint (PVE's self-signed certificates): the certificate's SHA-256 is checked
  before any request is sent (urllib3's ``assert_fingerprint`` check), then libcurl pins that
  certificate's public key (CURLOPT_PINNEDPUBLICKEY), so no connection to another key carries
  the token;
- ``verify=False`` (only with --insecure): nothing is checked.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import socket
import ssl
import threading
from errno import ECONNREFUSED
from io import BytesIO
from typing import Any
from urllib.parse import urlsplit

import certifi
import pycurl
import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

_TLS_ERRORS = {
    pycurl.E_PEER_FAILED_VERIFICATION,
    pycurl.E_SSL_CACERT,
    pycurl.E_SSL_CONNECT_ERROR,
    pycurl.E_SSL_CERTPROBLEM,
}


def _normal(fingerprint: str) -> str:
    return fingerprint.replace(":", "").lower()


def certificate(host: str, port: int, timeout: float) -> bytes:
    """The DER certificate the server presents (no verification: only its digest is compared)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=timeout) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    if not der:
        raise ssl.SSLError("the server presented no certificate")
    return der


def public_key_pin(der: bytes) -> str:
    """libcurl's pin for the certificate's public key: ``sha256//`` and the base64 SPKI digest."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    spki = (
        x509.load_der_x509_certificate(der)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return "sha256//" + base64.b64encode(hashlib.sha256(spki).digest()).decode()


class CurlAdapter(BaseAdapter):
    """One libcurl handle per worker thread (its own kept-alive connection), for every method."""

    def __init__(self, fingerprint: str | None = None) -> None:
        super().__init__()
        self._fingerprint = _normal(fingerprint) if fingerprint else None
        self._pins: dict[tuple[str, int], str] = {}
        self._pin_lock = threading.Lock()
        self._local = threading.local()

    # ------------------------------------------------------------------ requests' adapter interface
    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Any = None,
        verify: bool | str = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> requests.Response:
        if cert:
            raise requests.exceptions.InvalidURL("client certificates are not supported by this transport")
        url = str(request.url)
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise requests.exceptions.InvalidURL(f"only https URLs are sent: {url}")
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        host, port = parts.hostname, parts.port or 443
        curl = self._handle()
        self._secure(curl, request, host, port, verify, connect)
        body = BytesIO()
        head: list[bytes] = []
        curl.setopt(pycurl.URL, url)
        curl.setopt(pycurl.WRITEDATA, body)
        curl.setopt(pycurl.HEADERFUNCTION, head.append)
        curl.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in request.headers.items()] + ["Expect:"])
        self._method(curl, request)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, int((connect or 0) * 1000))
        # requests' read timeout is the longest silence, not the whole transfer: libcurl's "too slow" check
        # (under 1 byte/s for that long, in whole seconds) is the same rule
        curl.setopt(pycurl.LOW_SPEED_LIMIT, 1 if read else 0)
        curl.setopt(pycurl.LOW_SPEED_TIME, max(1, math.ceil(read or 0)))
        try:
            curl.perform()
        except pycurl.error as exc:
            errno = curl.getinfo(pycurl.OS_ERRNO)
            self._local.curl = None  # a failed handle is not reused: its connection state is unknown
            curl.close()
            raise self._failure(exc, errno, request, host, port, connect) from None
        content = body.getvalue()
        body.seek(0)
        body.truncate()  # the handle keeps its buffer until the next request: not the answer too
        return self._response(request, curl.getinfo(pycurl.RESPONSE_CODE), head, content)

    def close(self) -> None:
        handle = getattr(self._local, "curl", None)
        if handle is not None:
            handle.close()
            self._local.curl = None

    # ------------------------------------------------------------------ parts of one request
    def _handle(self) -> pycurl.Curl:
        curl: pycurl.Curl | None = getattr(self._local, "curl", None)
        if curl is None:
            curl = pycurl.Curl()
            curl.setopt(pycurl.NOSIGNAL, 1)  # worker threads: no SIGALRM for timeouts
            curl.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTPS)
            curl.setopt(pycurl.SSLVERSION, pycurl.SSLVERSION_TLSv1_2)  # urllib3 2's minimum too
            curl.setopt(pycurl.PROXY, "")  # trust_env is off: no proxy from the environment
            curl.setopt(pycurl.FOLLOWLOCATION, 0)
            curl.setopt(pycurl.PATH_AS_IS, 1)  # the path proxmoxer built, percent-escapes and all, unchanged
            curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
            curl.setopt(pycurl.ACCEPT_ENCODING, "gzip, deflate")  # as requests asks, decoded by libcurl
            self._local.curl = curl
        return curl

    def _secure(self, curl: pycurl.Curl, request: Any, host: str, port: int, verify: bool | str, connect: Any) -> None:
        if self._fingerprint:
            curl.setopt(pycurl.SSL_VERIFYPEER, 0)
            curl.setopt(pycurl.SSL_VERIFYHOST, 0)
            curl.setopt(pycurl.PINNEDPUBLICKEY, self._pin(request, host, port, connect))
        elif verify is False:
            curl.setopt(pycurl.SSL_VERIFYPEER, 0)
            curl.setopt(pycurl.SSL_VERIFYHOST, 0)
        else:
            curl.setopt(pycurl.SSL_VERIFYPEER, 1)
            curl.setopt(pycurl.SSL_VERIFYHOST, 2)
            curl.setopt(pycurl.CAINFO, verify if isinstance(verify, str) else certifi.where())

    def _pin(self, request: Any, host: str, port: int, connect: Any) -> str:
        """The public-key pin of the certificate whose fingerprint is pinned, checked once per address."""
        pin = self._pins.get((host, port))  # every request asks: no lock once the address is checked
        if pin is not None:
            return pin
        with self._pin_lock:
            pin = self._pins.get((host, port))
            if pin is not None:
                return pin
            try:
                der = certificate(host, port, float(connect or 10))
            except OSError as exc:  # ssl.SSLError is an OSError
                raise self._os_failure(exc, request) from None
            presented = hashlib.sha256(der).hexdigest()
            if presented != self._fingerprint:  # urllib3's wording (util/ssl_.py assert_fingerprint)
                raise requests.exceptions.SSLError(
                    f'Fingerprints did not match. Expected "{self._fingerprint}", got "{presented}"', request=request
                )
            pin = self._pins[(host, port)] = public_key_pin(der)
            return pin

    @staticmethod
    def _method(curl: pycurl.Curl, request: requests.PreparedRequest) -> None:
        method = (request.method or "GET").upper()
        body = request.body
        data = body.encode() if isinstance(body, str) else (body or b"")
        if not isinstance(data, bytes):
            raise requests.exceptions.InvalidURL("streamed request bodies are not supported by this transport")
        if data:
            curl.setopt(pycurl.POSTFIELDSIZE, len(data))
            curl.setopt(pycurl.POSTFIELDS, data)
        else:
            curl.setopt(pycurl.HTTPGET, 1)  # no body (and none left from the handle's former request)
        if method == "GET":
            curl.unsetopt(pycurl.CUSTOMREQUEST)
        else:
            curl.setopt(pycurl.CUSTOMREQUEST, method)

    @staticmethod
    def _response(request: requests.PreparedRequest, status: int, head: list[bytes], body: bytes) -> requests.Response:
        response = requests.Response()
        response.status_code = status
        response.request = request
        response.url = str(request.url)
        response._content = body
        response.raw = BytesIO(body)
        headers: CaseInsensitiveDict[str] = CaseInsensitiveDict()
        for raw in head:  # the last response's headers (a 100 Continue comes first)
            line = raw.decode("iso-8859-1").rstrip("\r\n")
            if line.startswith("HTTP/"):
                headers = CaseInsensitiveDict()
                response.reason = line.split(" ", 2)[2] if line.count(" ") >= 2 else ""
            elif ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip()] = value.strip()
        response.headers = headers
        response.encoding = requests.utils.get_encoding_from_headers(headers)
        return response

    # ------------------------------------------------------------------ failures, as urllib3 words them
    def _failure(self, exc: pycurl.error, errno: int, request: Any, host: str, port: int, connect: Any) -> Exception:
        args: tuple[Any, ...] = exc.args  # (CURLcode, libcurl's message)
        code, message = (int(args[0]), str(args[1])) if len(args) == 2 else (-1, str(exc))
        if code == pycurl.E_SSL_PINNEDPUBKEYNOTMATCH:
            with self._pin_lock:
                self._pins.pop((host, port), None)  # the server's key changed: check its certificate again
            try:
                self._pin(request, host, port, connect)
            except requests.exceptions.RequestException as again:
                return again
            return requests.exceptions.SSLError(f"public key pin mismatch: {message}", request=request)
        if code in _TLS_ERRORS:
            reason = message.removeprefix("SSL certificate problem: ")
            return requests.exceptions.SSLError(f"certificate verify failed: {reason}", request=request)
        if code == pycurl.E_OPERATION_TIMEDOUT:
            if "connect" in message.lower():  # "Connection timed out after ..." (else "Operation timed out ...")
                return requests.exceptions.ConnectTimeout(message, request=request)
            return requests.exceptions.ReadTimeout(message, request=request)
        if code == pycurl.E_COULDNT_RESOLVE_HOST:
            return requests.exceptions.ConnectionError(socket.gaierror(message), request=request)
        if errno == ECONNREFUSED:
            return requests.exceptions.ConnectionError(ConnectionRefusedError(errno, message), request=request)
        if errno:
            return requests.exceptions.ConnectionError(OSError(errno, os.strerror(errno)), request=request)
        return requests.exceptions.ConnectionError(message, request=request)

    @staticmethod
    def _os_failure(exc: OSError, request: Any) -> Exception:
        """The fingerprint check's own connection failed: the same types as a request's failure."""
        if isinstance(exc, ssl.SSLError):
            return requests.exceptions.SSLError(str(exc), request=request)
        if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
            return requests.exceptions.ConnectTimeout(str(exc), request=request)
        return requests.exceptions.ConnectionError(exc, request=request)  # refused, unknown host (gaierror), ...
