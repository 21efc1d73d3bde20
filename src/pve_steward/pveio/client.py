"""The only module that talks to Proxmox VE (and the only one that imports proxmoxer).

Tools depend on the two-method :class:`ProxmoxClient` protocol. Requests go to paths built
from fixed API words and validated identifiers only (:func:`api_path`), never from strings a
caller supplied. Errors come out as :mod:`pve_steward.errors` types. Requests run on a
pool of ``concurrency`` worker threads sharing one connection pool (so the bound holds across
concurrent tool calls); reads are retried with backoff on transient failures, and every request
has a timeout.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
import unicodedata
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import quote, urlsplit

import anyio
import anyio.to_thread
from pydantic import SecretStr

from pve_steward.config import Settings
from pve_steward.errors import (
    PveApiError,
    PveAuthError,
    PveConnectionRefused,
    PveError,
    PveNotFound,
    PveParamError,
    PvePermissionError,
    PveTimeout,
    PveTlsError,
    PveUnavailable,
    PveUnknownHost,
)
from pve_steward.observe import metrics
from pve_steward.observe.telemetry import pve_request_span
from pve_steward.pve import ids
from pve_steward.pveio.budget import open_budget
from pve_steward.pveio.requestpool import REQUEST_PRIORITY, URGENT, RequestPool
from pve_steward.security.tiers import Tier

if TYPE_CHECKING:  # imported on first use: proxmoxer and requests cost ~0.15 s of every start (issue 17)
    import requests
    from proxmoxer import ProxmoxAPI
    from requests.adapters import BaseAdapter

log = logging.getLogger(__name__)
logging.getLogger("proxmoxer").setLevel(logging.WARNING)  # proxmoxer logs request bodies at INFO

WriteMethod = Literal["POST", "PUT", "DELETE"]

# Every literal word that may appear in a request path. Caller-supplied values never become
# words: they must be one of the typed segments below, each checked against PVE's format.
API_WORDS = frozenset(
    {
        "version",
        "cluster",
        "status",
        "resources",
        "tasks",
        "ha",
        "current",
        "manager_status",
        "groups",
        "rules",
        "backup",
        "backup-info",
        "not-backed-up",
        "replication",
        "options",
        "storage",
        "nodes",
        "qemu",
        "lxc",
        "config",
        "snapshot",
        "migrate",
        "mapping",
        "pci",
        "usb",
        "dir",
        "content",
        "log",
        "certificates",
        "info",
        "apt",
        "update",
        "repositories",
        "disks",
        "list",
        "zfs",
        "subscription",
        "access",
        "permissions",
        "vzdump",
        "defaults",
        "start",
        "stop",
        "shutdown",
        "reboot",
        "suspend",
        "resume",
        "reset",
        "rollback",
        "relocate",
        "agent",
        "pending",
        "services",
        "ceph",
        "flags",
        "metadata",
        "osd",
        "pool",
        "mon",
        "mds",
        "mgr",
        "cmd-safety",
        # access, firewall and monitoring checks (analysis/checks/access.py, firewall.py, cluster_config.py)
        "users",
        "tfa",
        "acl",
        "roles",
        "domains",
        "pools",
        "firewall",
        "metrics",
        "server",
        # Proxmox Backup Server (proxmox-backup src/api2): read by the optional PBS connection
        "admin",
        "datastore",
        "datastore-usage",
        "gc",
        "snapshots",
        "verify",
        "prune",
        "sync",
        # upgrade readiness (analysis/upgradeinfo.py)
        "versions",
        "network",
        "totem",
        "qdevice",
        "cfg",
        "raw",
        "capabilities",
        "machines",
        # node health checks (analysis/checks/node*.py)
        "time",
        "rrddata",
        "dns",
        "lvmthin",
        "hosts",
        "hardware",
        "smart",
        "sdn",
        "zones",
        "vnets",
        "subnets",
        "controllers",
        "interfaces",
        "network-get-interfaces",
        "get-osinfo",
        "get-fsinfo",
        "fabrics",
        "neighbors",
    }
)
# The OSD map flags PVE's Ceph API can set (pve-manager PVE/Ceph/Tools.pm get_possible_osd_flags).
CEPH_FLAGS = frozenset(
    {
        "nobackfill",
        "nodeep-scrub",
        "nodown",
        "noin",
        "noout",
        "norebalance",
        "norecover",
        "noscrub",
        "notieragent",
        "noup",
        "pause",
    }
)


@dataclass(frozen=True)
class Segment:
    """A validated identifier inside a path (node name, vmid, storage, snapshot, UPID, HA sid...).

    Whatever made it, a segment is never empty, never a dot segment, and never holds a control
    character; it is percent-encoded on the way out (:meth:`ApiPath.encoded`).
    """

    value: str

    def __post_init__(self) -> None:
        if self.value in ("", ".", "..") or any(unicodedata.category(c) == "Cc" for c in self.value):
            raise ValueError(f"path segment {self.value!r} is empty, a dot segment or has control characters")


def node(name: str, param: str = "node") -> Segment:
    return Segment(ids.check_node(name, param))


def vmid(value: int, param: str = "vmid") -> Segment:
    return Segment(str(ids.check_vmid(value, param)))


def storage(value: str, param: str = "storage") -> Segment:
    return Segment(ids.check_storage(value, param))


def snapshot(value: str, param: str = "snapshot") -> Segment:
    return Segment(ids.check_snapshot(value, param))


def upid(value: str, param: str = "upid") -> Segment:
    return Segment(ids.check_upid(value, param))


def ha_sid(value: str, param: str = "sid") -> Segment:
    return Segment(ids.check_ha_sid(value, param))


def replication_job(value: str, param: str = "job") -> Segment:
    return Segment(ids.check_replication_id(value, param))


def ceph_flag(value: str, param: str = "flag") -> Segment:
    if value not in CEPH_FLAGS:
        raise ids.InvalidIdentifier(param, value, f"Ceph flags are {', '.join(sorted(CEPH_FLAGS))}")
    return Segment(value)


# PBS datastore names (pbs-api-types datastore.rs DATASTORE_SCHEMA: PROXMOX_SAFE_ID_FORMAT, 3..32 chars)
_DATASTORE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._\-]{2,31}")


def datastore(value: str, param: str = "store") -> Segment:
    if not isinstance(value, str) or not _DATASTORE_RE.fullmatch(value):
        raise ids.InvalidIdentifier(param, str(value), "a PBS datastore name: 3 to 32 of A-Z a-z 0-9 _ . -")
    return Segment(value)


# pve-network / proxmox-ve-rs FabricId: letters, digits and '-', at most 8 characters
_SDN_FABRIC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,7}$")


_SDN_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,6}[A-Za-z0-9]$")  # pve-network Zones/Plugin.pm pve-sdn-zone-id


def sdn_zone(value: str, param: str = "zone") -> Segment:
    if not _SDN_ZONE.match(value):
        raise ids.InvalidIdentifier(param, value, "SDN zone ids are 2-8 letters and digits, starting with a letter")
    return Segment(value)


def sdn_vnet(value: str, param: str = "vnet") -> Segment:
    """pve-network VnetPlugin.pm pve-sdn-vnet-id: the zone ids' grammar."""
    if not _SDN_ZONE.match(value):
        raise ids.InvalidIdentifier(param, value, "SDN vnet ids are 2-8 letters and digits, starting with a letter")
    return Segment(value)


def sdn_fabric(value: str, param: str = "fabric") -> Segment:
    if not _SDN_FABRIC.match(value):
        raise ids.InvalidIdentifier(param, value, "SDN fabric ids are 1-8 letters, digits and '-'")
    return Segment(value)


def backup_job(value: str, param: str = "id") -> Segment:
    return Segment(ids.check_backup_job(value, param))


@dataclass(frozen=True)
class ApiPath:
    segments: tuple[str, ...]

    def __str__(self) -> str:
        return "/" + "/".join(self.segments)

    def encoded(self) -> tuple[str, ...]:
        """Each segment percent-encoded: '?', '#', '%', '/' and spaces cannot shape the request line.

        PVE's HTTP server unescapes the path before routing (pve-http-server AnyEvent.pm
        handle_request: uri_unescape($request->uri->path())), so an encoded segment means the same.
        """
        return tuple(quote(s, safe=":@") for s in self.segments)

    def template(self) -> str:
        """The path with every identifier replaced by ``{id}``: what traces may show (no cluster names)."""
        return "/" + "/".join(s if s in API_WORDS else "{id}" for s in self.segments)

    def join(self, *parts: str | Segment) -> ApiPath:
        return ApiPath(self.segments + api_path(*parts).segments)


def api_path(*parts: str | Segment) -> ApiPath:
    """Build a path from fixed API words and validated segments; anything else is a programming error."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, Segment):
            out.append(part.value)
        elif part in API_WORDS:
            out.append(part)
        else:
            raise ValueError(f"'{part}' is not a known API path word; wrap caller input in a typed segment")
    return ApiPath(tuple(out))


class ProxmoxClient(Protocol):
    """What tools may do with the cluster: read, and call a write method."""

    async def get(self, path: ApiPath, /, **params: Any) -> Any: ...

    async def call(self, method: WriteMethod, path: ApiPath, /, **params: Any) -> Any: ...


# ---------------------------------------------------------------- proxmoxer-backed implementation


def _adapter(verify: bool | str, fingerprint: str | None, pool_maxsize: int) -> BaseAdapter:
    """The session's HTTPS transport: requests' urllib3 adapter with one TLS context for every connection.

    urllib3 makes a context per connection when it is given none, and loads the system's CA store into it
    even when nothing is verified (a pinned fingerprint): about 20 ms of CPU and 0.5 MiB each, sixteen
    times over as the pool opens (design record 261206-60). One context is made here, once, for the
    session's choice: the fingerprint's (no chain; urllib3's ``assert_fingerprint`` compares the certificate's
    SHA-256 after the handshake and before the request, so no request, and no token, reaches another key),
    a CA file's or certifi's bundle (as requests verifies; host name checked), or nothing (``--insecure``).
    """
    import ssl

    from requests.adapters import HTTPAdapter

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # urllib3 2's own minimum
    if fingerprint or verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        import certifi

        context.load_verify_locations(cafile=verify if isinstance(verify, str) else certifi.where())

    class PinnedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["ssl_context"] = context
            if fingerprint:
                kwargs["assert_fingerprint"] = fingerprint
            super().init_poolmanager(*args, **kwargs)

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            """Whether to verify, from the request; which CAs, from the context (requests would name its bundle
            here, and urllib3 load it into the shared context again on every connection)."""
            conn.cert_reqs = "CERT_REQUIRED" if verify else "CERT_NONE"
            conn.ca_certs = conn.ca_cert_dir = None

    return PinnedAdapter(pool_connections=1, pool_maxsize=pool_maxsize)


_LAST_BODY = threading.local()  # the body of this worker thread's last GET: ProxmoxerClient.get_with_body


def _lean_session(proxmoxer_session: requests.Session) -> requests.Session:
    """proxmoxer's session with a short path for reads; writes keep proxmoxer's own path.

    ``requests.Session.request`` merges the session's defaults into every call (sessions.py
    ``merge_setting``, with typing-Protocol ``isinstance`` checks) and resolves proxies, cookies and
    redirects: about 30 % of a read's CPU, and reads are CPU-bound at the planner's concurrency
    (issue 17). Our session has none of those to merge: token auth (no cookies), ``trust_env`` off
    (no proxies), no hooks, and PVE's API does not redirect. So a GET is prepared once from the
    session's headers and the token auth, and handed to the adapter (which pins the fingerprint).
    """
    from urllib.parse import urlencode

    import requests
    from proxmoxer.backends.https import ProxmoxHttpSession
    from requests.structures import CaseInsensitiveDict

    class LeanSession(ProxmoxHttpSession):  # type: ignore[misc]  # proxmoxer ships no types
        def request(self, method: str, url: str, params: Any = None, **kwargs: Any) -> requests.Response:
            if method != "GET" or any(v for v in kwargs.values()):
                written: requests.Response = super().request(method, url, params=params, **kwargs)
                return written
            # What PreparedRequest.prepare builds for a body-less GET with these parts (models.py), without its
            # generic URL re-parsing: proxmoxer's URL is already quoted, and urlencode(doseq) is what requests
            # encodes parameters with (models.py _encode_params).
            prepared = requests.PreparedRequest()
            prepared.method = "GET"
            prepared.url = f"{url}?{urlencode(params, doseq=True)}" if params else url
            prepared.headers = CaseInsensitiveDict(self.headers)
            auth = self.auth
            auth(prepared)  # proxmoxer's token auth sets the Authorization header
            response: requests.Response = self.get_adapter(url).send(
                prepared, stream=False, timeout=auth.timeout, verify=auth.verify_ssl, cert=self.cert, proxies={}
            )
            _LAST_BODY.value = response.content  # read now, as Session.send does without stream; kept for the cache
            return response

    lean = LeanSession()
    lean.__dict__.update(proxmoxer_session.__dict__)  # auth, headers, adapters, cert, trust_env
    return lean


class WriteRefused(PveError):
    """The client itself refuses to send a write: the server runs read-only (defence in depth)."""


def _encode(params: dict[str, Any]) -> dict[str, Any]:
    """PVE wants booleans as 1/0 (it rejects 'True'); None means 'not given'."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = int(value) if isinstance(value, bool) else value
    return out


_NOT_FOUND_HINTS = ("does not exist", "no such", "not found", "unable to find")


def map_error(exc: BaseException, method: str, path: ApiPath, service: str = "PVE") -> PveError:
    """Translate proxmoxer/requests exceptions into our error types (the one place that knows them).

    ``service`` is the API that answered ("PVE", or "PBS" for the backup server's client): it is named in
    the wording and decides the advice (errors.advice).
    """
    err = _mapped(exc, method, path, service)
    err.service = service
    return err


def _mapped(exc: BaseException, method: str, path: ApiPath, service: str) -> PveError:
    import requests
    from proxmoxer import AuthenticationError, ResourceException

    where = f"{method} {path}"
    if isinstance(exc, ResourceException):
        status = int(exc.status_code)
        message = str(exc.content or exc.status_message).strip()
        if status == 401:
            return PveAuthError(
                "authentication failed (401): the token id or secret is wrong, or the token expired or was removed",
                status=status,
                path=str(path),
            )
        if status == 403:
            return PvePermissionError(message, status=status, path=str(path))
        if status == 400:
            errors = exc.errors if isinstance(exc.errors, dict) else {}
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
            return PveParamError(
                f"{service} rejected the parameters of {where}: {detail or message}",
                {str(k): str(v) for k, v in errors.items()},
                status=status,
                path=str(path),
            )
        if status in (404, 501):
            return PveNotFound(
                f"{where}: not available on this {service} version ({message})", status=status, path=str(path)
            )
        if 595 <= status <= 599:
            return PveUnavailable(f"node unreachable for {where}: {message}", status=status, path=str(path))
        if any(h in message.lower() for h in _NOT_FOUND_HINTS):
            return PveNotFound(message, status=status, path=str(path))
        return PveApiError(f"{where} failed: {message}", status=status, path=str(path))
    if isinstance(exc, AuthenticationError):
        return PveAuthError(f"authentication failed: {exc}", path=str(path))
    if isinstance(exc, requests.exceptions.SSLError):
        return _tls_error(exc, where, str(path))
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return PveTimeout(f"{where}: no answer from {_address(exc)} within the connect timeout", path=str(path))
    if isinstance(exc, requests.exceptions.Timeout):
        return PveTimeout(f"{where} timed out", path=str(path))
    if isinstance(exc, requests.exceptions.ConnectionError):
        return _connection_error(exc, where, str(path))
    if isinstance(exc, requests.exceptions.RequestException):
        return PveUnavailable(f"{where}: connection failed ({type(exc).__name__})", path=str(path))
    return PveApiError(f"{where} failed unexpectedly: {type(exc).__name__}", path=str(path))


_PRESENTED = re.compile(r'got "?([0-9a-fA-F:]{64,95})"?')
_VERIFY_REASON = re.compile(r"certificate verify failed: ([^(']+)")


def _address(exc: requests.exceptions.RequestException) -> str:
    url = getattr(exc.request, "url", None) or ""
    return urlsplit(str(url)).netloc or "the server"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception, what it wraps (args, reason, cause, context): requests hides the OS error deep inside."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:
        e = todo.pop()
        if any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [
            x for x in (*e.args, getattr(e, "reason", None), e.__cause__, e.__context__) if isinstance(x, BaseException)
        ]
    return seen


def _connection_error(exc: requests.exceptions.ConnectionError, where: str, path: str) -> PveError:
    from requests.exceptions import RequestException
    from urllib3.exceptions import NameResolutionError

    address = _address(exc)
    chain = _chain(exc)
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "connection refused" in str(exc).lower():
        return PveConnectionRefused(f"{where}: connection refused by {address} (nothing listens there)", path=path)
    if any(isinstance(e, NameResolutionError | socket.gaierror) for e in chain):
        host = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
        return PveUnknownHost(f"{where}: the host name '{host}' does not resolve", path=path)
    reason = next(
        (e.strerror for e in chain if isinstance(e, OSError) and e.strerror and not isinstance(e, RequestException)),
        type(exc).__name__,
    )
    return PveUnavailable(f"{where}: connection to {address} failed ({reason})", path=path)


def _tls_error(exc: requests.exceptions.SSLError, where: str, path: str) -> PveTlsError:
    text = str(exc)
    if "fingerprint" in text.lower():
        m = _PRESENTED.search(text)
        presented = _colons(m.group(1)) if m else None
        shown = f"; the server presented {presented}" if presented else ""
        return PveTlsError(
            f"TLS verification failed for {where}: certificate fingerprint mismatch{shown}",
            path=path,
            presented=presented,
        )
    m = _VERIFY_REASON.search(text)
    why = f" ({m.group(1).strip()})" if m else ""
    return PveTlsError(f"TLS verification failed for {where}: certificate not trusted{why}", path=path)


def _colons(digest: str) -> str:
    """PVE's notation for a SHA-256 fingerprint (pvenode cert info): upper-case hex pairs joined by colons."""
    hexed = digest.replace(":", "").upper()
    return ":".join(hexed[i : i + 2] for i in range(0, len(hexed), 2))


def _transient(err: PveError) -> bool:
    return (
        isinstance(err, PveTimeout)
        or (isinstance(err, PveUnavailable) and err.status is None)
        or err.status in (502, 503, 504)
    )


class ProxmoxerClient:
    """:class:`ProxmoxClient` over proxmoxer's HTTPS backend with token auth."""

    def __init__(self, settings: Settings) -> None:
        if not settings.url or not settings.token_id:
            raise ValueError("url and token_id are required to connect (see --help)")
        secret = settings.secret()
        if not secret:
            raise ValueError("a token secret is required: set token_secret_file or PVE_STEWARD_TOKEN_SECRET")
        user, _, token_name = settings.token_id.partition("!")
        verify: bool | str = True
        if settings.fingerprint:
            verify = False  # the fingerprint is checked by the adapter instead of the CA chain
        elif settings.ca_file is not None:
            verify = str(settings.ca_file)
        elif settings.insecure or not settings.verify_tls:
            verify = False
            log.warning(
                "TLS verification is DISABLED for %s: anyone on the path can impersonate the cluster", settings.url
            )
        self._connection: dict[str, Any] = {
            "host": settings.url,
            "user": user,
            "token_name": token_name,
            "token_value": secret,
            "verify_ssl": verify is not False,  # which CAs: the transport's TLS context (_adapter)
            "timeout": (settings.connect_timeout, settings.timeout),
        }
        self._fingerprint = settings.fingerprint
        self._verify = verify
        self._concurrency = settings.concurrency
        self._proxmox: ProxmoxAPI | None = None  # made by the first request (proxmoxer is imported then)
        self._connect_lock = threading.Lock()
        self._workers: RequestPool | None = None
        self._entry: str | None = None  # the node we talk to, once /cluster/status named it (see _gate)
        # heavy reads in flight per PVE node (per event loop: tests run many), see PER_NODE
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str | None, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary()
        )
        self._retries = settings.retries
        store = settings.request_budget_store or settings.token_store
        self.budget = open_budget(store, settings.url, settings.request_budget, settings.request_budget_burst)
        self._read_only = settings.read_only or settings.tier is Tier.READ_ONLY
        self.requests_made = 0
        self.service = "PVE"  # the API this client speaks: its errors, metrics and spans name it

    @classmethod
    def for_pbs(cls, settings: Settings) -> ProxmoxerClient:
        """The same client for Proxmox Backup Server: proxmoxer's PBS service (port 8007 by default,
        ``PBSAPIToken=user@realm!name:secret``, proxmoxer core.py SERVICES["PBS"]) with the PBS address and
        token, verified by the pinned PBS fingerprint, else the PBS CA file, else the system CAs."""
        if not settings.pbs_url or not settings.pbs_token_id:
            raise ValueError("pbs_url and pbs_token_id are required to connect to PBS (see --help)")
        secret = settings.pbs_secret()
        if not secret:
            raise ValueError(
                "a PBS token secret is required: set pbs_token_secret_file or PVE_STEWARD_PBS_TOKEN_SECRET"
            )
        pbs = settings.model_copy(
            update={
                "url": settings.pbs_url,
                "token_id": settings.pbs_token_id,
                "token_secret": SecretStr(secret),
                "token_secret_file": None,
                "fingerprint": settings.pbs_fingerprint,
                "ca_file": settings.pbs_ca_file,
                "insecure": False,
                "verify_tls": True,
            }
        )
        client = cls(pbs)
        client._connection["service"] = "PBS"
        client.service = "PBS"
        return client

    @property
    def _pool(self) -> RequestPool:
        """The worker threads, started by the first request (called on the event loop's thread)."""
        if self._workers is None:
            self._workers = RequestPool(self._concurrency)
        return self._workers

    def _api(self, segments: list[str]) -> Any:
        """proxmoxer's resource for ``segments``; the session is built on first use (a worker thread)."""
        with self._connect_lock:
            if self._proxmox is None:
                self._proxmox = self._connect()
        return self._proxmox(segments)

    def _connect(self) -> ProxmoxAPI:
        from proxmoxer import ProxmoxAPI

        api = ProxmoxAPI(**self._connection)
        session: requests.Session = api._store["session"]  # proxmoxer 2.x keeps its session here
        session.trust_env = False  # environment CA bundles must not override our TLS choice
        session.mount("https://", _adapter(self._verify, self._fingerprint, self._concurrency))
        api._store["session"] = _lean_session(session)
        return api

    def _refuse_write(self, method: str, path: ApiPath) -> None:
        if method != "GET" and self._read_only:
            raise WriteRefused(
                f"{method} {path} refused: this server runs read-only (--read-only or --tier read_only), "
                "so its client sends no POST, PUT or DELETE",
                path=str(path),
            )

    def _request(self, method: str, path: ApiPath, params: dict[str, Any]) -> Any:
        self._refuse_write(method, path)
        endpoint = metrics.endpoint_class(path.segments)
        self.budget.acquire()  # the shared per-cluster budget (budget.py); not part of PVE's latency
        started = time.monotonic()
        status = "error"
        with pve_request_span(method, path.template(), self.service) as span:
            try:
                result = self._send(method, path, params)
                status = "200"
                return result
            except PveError as exc:
                status = str(exc.status) if exc.status is not None else "error"
                raise
            finally:
                span.set_attribute("http.response.status_code", status)
                requests_of, latency_of = metrics.api_instruments(self.service)
                requests_of.labels(endpoint=endpoint, method=method, status=status).inc()
                latency_of.labels(endpoint=endpoint).observe(time.monotonic() - started)

    def _send(self, method: str, path: ApiPath, params: dict[str, Any]) -> Any:
        resource = self._api(list(path.encoded()))
        self.requests_made += 1
        try:
            if method == "GET":
                result = resource.get(**params)
            elif method == "POST":
                result = resource.post(**params)
            elif method == "PUT":
                result = resource.put(**params)
            else:
                result = resource.delete(**params)
        except Exception as exc:  # the boundary: everything is mapped to our own types here
            raise map_error(exc, method, path, self.service) from None
        if isinstance(result, dict) and set(result) == {"errors"} and isinstance(result["errors"], bytes):
            err = PveApiError(f"{method} {path}: the {self.service} API answered with a non-JSON body", path=str(path))
            err.service = self.service
            raise err
        return result

    async def get(self, path: ApiPath, /, **params: Any) -> Any:
        return (await self._retried(self._request_with_body, path, params))[0]

    async def get_with_body(self, path: ApiPath, /, **params: Any) -> tuple[Any, bytes | None]:
        """The answer, and the JSON body PVE sent it in (``{"data": ...}``): the read cache keeps that
        instead of encoding the answer again on the event loop (readcache.RawReads)."""
        return await self._retried(self._request_with_body, path, params)  # type: ignore[no-any-return]

    def _request_with_body(self, method: str, path: ApiPath, params: dict[str, Any]) -> tuple[Any, bytes | None]:
        try:
            result = self._request(method, path, params)
            body: bytes | None = getattr(_LAST_BODY, "value", None)  # set by this thread's LeanSession for this GET
            if path.segments == ("cluster", "status") and isinstance(result, list):
                self._entry = next((str(r.get("name")) for r in result if isinstance(r, dict) and r.get("local")), None)
            return result, body
        finally:
            _LAST_BODY.value = None  # a failed read leaves no body for the next one to take

    def _gate(self, path: ApiPath) -> asyncio.Semaphore:
        """The heavy reads' gate of the node that runs ``path``: a node's own paths run there, every other path
        on the node we talk to (no ``proxyto``), which ``/cluster/status`` names ``local`` once it was read."""
        segments = path.segments
        on_node = segments[:1] == ("nodes",) and len(segments) > 1 and not ASKED_NODE_RUNS.intersection(segments[2:])
        node = segments[1] if on_node else self._entry
        gates = self._gates.setdefault(asyncio.get_running_loop(), {})
        gate = gates.get(node)
        if gate is None:
            gate = gates[node] = asyncio.Semaphore(PER_NODE)
        return gate

    async def _retried(self, request: Callable[..., Any], path: ApiPath, params: dict[str, Any]) -> Any:
        encoded = _encode(params)
        delay = 0.2
        priority = REQUEST_PRIORITY.get()
        for attempt in range(self._retries + 1):
            try:
                # cancelling the caller drops the request if it has not started yet
                if priority == URGENT:  # a cheap call's read: not held behind heavy reads at its node
                    return await self._pool.run(request, "GET", path, encoded, priority=priority)
                async with self._gate(path):
                    return await self._pool.run(request, "GET", path, encoded, priority=priority)
            except PveError as err:
                if attempt >= self._retries or not _transient(err):
                    raise
                log.info("retrying GET %s after %s (attempt %d)", path, type(err).__name__, attempt + 1)
                await anyio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def call(self, method: WriteMethod, path: ApiPath, /, **params: Any) -> Any:
        # Writes are never retried: a lost answer does not mean the write did not happen. A write
        # that has started is waited for even when the caller is cancelled, so its outcome is known.
        self._refuse_write(method, path)
        future = self._pool.submit(self._request, method, path, _encode(params))
        return await anyio.to_thread.run_sync(future.result)

    def close(self) -> None:
        """Stop the worker threads (queued requests are dropped)."""
        if self._workers is not None:
            self._workers.shutdown()


GATHER_LANES = 128

# Heavy reads in flight at one PVE node. A node answers three API calls at once (pveproxy's and pvedaemon's
# max_workers, 3 by default), and a node-local path asked of another node is forwarded to that node's own
# workers (pve-http-server AnyEvent.pm proxy_request). Sixteen reads of one node's guests in flight (an
# evacuation plan's) kept thirteen waiting there: another user's request waited four handlers' time for no
# gain, since three were all the node ran. Twice its workers keep it busy (design record 261206-61).
PER_NODE = 6
# A node's paths that run where they are asked, not on the node they name: no proxyto in PVE's schema (the
# RRD data of a node or guest, a guest's firewall: cluster-wide files). Each node's rrddata, asked of one node,
# ran in that one node's pvedaemon.
ASKED_NODE_RUNS = frozenset({"rrd", "rrddata", "firewall"})


async def gather(
    client: ProxmoxClient, paths: Iterable[tuple[str, ApiPath, dict[str, Any]]], *, read_only: bool = False
) -> dict[str, Any | PveError]:
    """Run many reads concurrently (the client bounds concurrency); each result is data or the error.

    ``read_only``: the caller never changes the answers, so a client that shares them among its
    readers (readcache.ReadCache.get_shared) may hand it the shared ones instead of copies.

    At most ``GATHER_LANES`` tasks take the reads in turn: a task per read put thousands of task
    starts on the event loop at once, ahead of a cheap call's next step (about 100 ms at 2,000
    guests, issue 17). The lanes outnumber the client's requests in flight (``concurrency`` <= 64).
    """
    results: dict[str, Any | PveError] = {}
    reads = list(paths)
    todo = iter(reads)
    get = (getattr(client, "get_shared", None) if read_only else None) or client.get

    crashed: list[Exception] = []

    async def lane() -> None:
        for key, path, params in todo:  # the lanes share one iterator: each read is taken once
            try:
                results[key] = await get(path, **params)
            except PveError as err:
                results[key] = err
            except Exception as exc:  # a bug or a malformed answer: raised below as itself, as a plain await would,
                crashed.append(exc)  # not wrapped in the task group's ExceptionGroup (the guard names its type)
                return

    async with anyio.create_task_group() as tg:
        for _ in range(min(GATHER_LANES, len(reads))):
            tg.start_soon(lane)
    if crashed:
        raise crashed[0]
    return {key: results[key] for key, _, _ in reads}  # in the order asked, not the order answered
