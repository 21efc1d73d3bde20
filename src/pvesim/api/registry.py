"""Route registry shared by the handler modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pvesim.access import Token
from pvesim.apischema import MethodSpec
from pvesim.state import Cluster, Guest

Handler = Callable[["Call"], Any]
ROUTES: dict[tuple[str, str], Handler] = {}


class ApiError(Exception):
    """An error answer: status, PVE's message and optional per-parameter errors.

    PVE's handlers mostly ``die "...\n"``, and the body's message keeps that newline; ``newline=False``
    for the few messages without one (a ``raise`` of a bare text, as TFA.pm's 404)."""

    def __init__(self, status: int, message: str, errors: dict[str, str] | None = None, newline: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.newline = newline

    @property
    def wire_message(self) -> str:
        return self.message + "\n" if self.newline and not self.message.endswith("\n") else self.message


@dataclass(frozen=True)
class Result:
    """Data with the attributes a handler sets beside it (RPCEnvironment ``set_result_attrib``): ``total``
    (log lines, tasks) and ``changes`` (the network's pending diff); the formatter sends them when truthy."""

    data: Any
    total: int | None = None
    changes: str | None = None


@dataclass(frozen=True)
class Download:
    """A file the handler streams instead of data (``download => {fh, 'content-type', ...}`` in PVE, for
    methods marked ``download_allowed``): the bytes and the headers PVE sends with them."""

    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def unwrap(result: Any) -> Any:
    """The data of a handler's result, without the attributes beside it."""
    return result.data if isinstance(result, Result) else result


def route(method: str, template: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        ROUTES[(method, template)] = fn
        return fn

    return deco


@dataclass
class Call:
    """One API call: the cluster, the calling token and the validated parameters."""

    cluster: Cluster
    token: Token
    params: dict[str, Any]
    spec: MethodSpec

    @property
    def user(self) -> str:
        return self.token.full_id

    def can(self, path: str, priv: str) -> bool:
        return self.token.has(path, priv)

    def flag(self, name: str, default: int = 0) -> bool:
        return bool(int(self.params.get(name, default)))

    def guest(self, gtype: str) -> Guest:
        """The guest addressed by {node}/{vmid} in the path, or PVE's 'does not exist' error."""
        node, vmid = self.params["node"], int(self.params["vmid"])
        guest = self.cluster.guest_on(node, vmid, gtype)
        if guest is None:
            folder = "qemu-server" if gtype == "qemu" else "lxc"
            raise ApiError(500, f"Configuration file 'nodes/{node}/{folder}/{vmid}.conf' does not exist")
        return guest


def b(value: bool) -> int:
    """PVE renders booleans as 0/1."""
    return 1 if value else 0
