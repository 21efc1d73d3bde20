"""proxmoxer and requests failures become our own errors, with messages that say how to fix them."""

from __future__ import annotations

import socket

import pytest
import requests
import urllib3
from proxmoxer import ResourceException

from pve_steward.errors import (
    PveApiError,
    PveAuthError,
    PveConnectionRefused,
    PveNotFound,
    PveParamError,
    PvePermissionError,
    PveTimeout,
    PveTlsError,
    PveUnavailable,
    PveUnknownHost,
    advice,
    connection_problem,
)
from pve_steward.pveio.client import _encode, api_path, map_error, node, vmid

PATH = api_path("nodes", node("pve1"), "qemu", vmid(100), "migrate")


def rex(status: int, reason: str, errors: dict[str, str] | None = None) -> ResourceException:
    return ResourceException(status, "x", reason, errors=errors)


def test_permission_error_names_privilege_path_and_fix() -> None:
    err = map_error(rex(403, "Permission check failed (/vms/100, VM.Migrate)"), "POST", PATH)
    assert isinstance(err, PvePermissionError)
    assert (err.acl_path, err.privilege) == ("/vms/100", "VM.Migrate")
    assert advice(err).startswith("token lacks VM.Migrate on /vms/100: grant PVEVMAdmin on /vms")
    audit = map_error(rex(403, "Permission check failed (/vms/100, VM.Audit)"), "GET", PATH)
    assert "grant PVEAuditor on /vms" in advice(audit)
    anyof = map_error(
        rex(403, "Permission check failed (/storage/x, Datastore.Audit|Datastore.AllocateSpace)"), "GET", PATH
    )
    assert "Datastore.Audit|Datastore.AllocateSpace on /storage/x" in advice(anyof)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (rex(401, "authentication failure"), PveAuthError),
        (rex(400, "Parameter verification failed.", {"target": "property is missing"}), PveParamError),
        (rex(501, "Method 'GET /cluster/ha/rules' not implemented"), PveNotFound),
        (rex(500, "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"), PveNotFound),
        (rex(595, "No route to host"), PveUnavailable),
        (rex(596, "Connection timed out"), PveUnavailable),
        (rex(500, "VM is locked (backup)"), PveApiError),
        (requests.exceptions.SSLError("fingerprint mismatch"), PveTlsError),
        (requests.exceptions.ConnectTimeout("slow"), PveTimeout),
        (requests.exceptions.ReadTimeout("slow"), PveTimeout),
        (requests.exceptions.ConnectionError("refused"), PveUnavailable),
        (requests.exceptions.ChunkedEncodingError("cut"), PveUnavailable),
    ],
)
def test_mapping(exc: BaseException, kind: type) -> None:
    err = map_error(exc, "GET", PATH)
    assert type(err) is kind
    assert "Traceback" not in err.message


def test_param_error_keeps_pve_field_messages() -> None:
    err = map_error(
        rex(400, "Parameter verification failed.", {"target": "property is missing and it is not optional"}),
        "POST",
        PATH,
    )
    assert isinstance(err, PveParamError)
    assert err.errors == {"target": "property is missing and it is not optional"}
    assert "target: property is missing" in err.message


def test_tls_error_advice_never_suggests_disabling_verification() -> None:
    err = map_error(requests.exceptions.SSLError("certificate verify failed"), "GET", PATH)
    assert "pin the node certificate" in advice(err)


def _connection_error(reason: BaseException, url: str = "https://pve1.lan:8006/api2/json/version") -> BaseException:
    """What requests raises: ConnectionError(MaxRetryError(reason=...)) with the request attached."""
    wrapped = urllib3.exceptions.MaxRetryError(None, url, reason)  # type: ignore[arg-type]
    return requests.exceptions.ConnectionError(wrapped, request=requests.Request("GET", url).prepare())


def test_connection_failures_say_what_happened_and_what_to_check() -> None:
    refused_os = ConnectionRefusedError(111, "Connection refused")
    new_conn = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: refused")  # type: ignore[arg-type]
    new_conn.__cause__ = refused_os
    refused = map_error(_connection_error(new_conn), "GET", PATH)
    assert isinstance(refused, PveConnectionRefused)
    assert "connection refused by pve1.lan:8006" in refused.message and "--url" in advice(refused)

    unresolved = urllib3.exceptions.NameResolutionError("nope.lan", None, socket.gaierror(-2, "Name unknown"))  # type: ignore[arg-type]
    unknown = map_error(_connection_error(unresolved, "https://nope.lan:8006/x"), "GET", PATH)
    assert isinstance(unknown, PveUnknownHost) and "'nope.lan' does not resolve" in unknown.message

    reset = map_error(
        _connection_error(
            urllib3.exceptions.ProtocolError("aborted", ConnectionResetError(104, "Connection reset by peer"))
        ),
        "GET",
        PATH,
    )
    assert type(reset) is PveUnavailable and "(Connection reset by peer)" in reset.message


def test_fingerprint_mismatch_shows_what_the_server_presented() -> None:
    got = "ab" * 32
    exc = requests.exceptions.SSLError(f'Fingerprints did not match. Expected "{"00" * 32}", got "{got}"')
    err = map_error(exc, "GET", PATH)
    assert isinstance(err, PveTlsError) and err.presented == ":".join(["AB"] * 32)
    assert f"the server presented {err.presented}" in err.message and "pvenode cert info" in advice(err)


def test_a_bad_token_is_an_authentication_failure_not_unreachable() -> None:
    err = map_error(rex(401, "authentication failure"), "GET", api_path("version"))
    message = connection_problem("pve1.lan", err)
    assert "authentication failed (401)" in message and "cannot reach" not in message


def test_booleans_are_sent_as_integers() -> None:
    assert _encode({"online": True, "force": False, "x": None, "target": "pve2"}) == {
        "online": 1,
        "force": 0,
        "target": "pve2",
    }


def test_pbs_failures_name_pbs_and_point_at_its_own_settings() -> None:
    """The backup server's client maps failures alike, but names PBS and PBS's own settings, port and tools."""
    pbs_path = api_path("admin", "datastore")
    param = map_error(rex(400, "parameter verification failed", {"store": "bad"}), "GET", pbs_path, "PBS")
    assert param.service == "PBS" and param.message.startswith("PBS rejected the parameters of GET /admin/datastore")
    missing = map_error(rex(501, "Method not implemented"), "GET", pbs_path, "PBS")
    assert "not available on this PBS version" in missing.message
    assert "PVE" not in param.message + missing.message

    refused_os = ConnectionRefusedError(111, "Connection refused")
    new_conn = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: refused")  # type: ignore[arg-type]
    new_conn.__cause__ = refused_os
    refused = map_error(_connection_error(new_conn, "https://pbs.lan:8007/api2/json/version"), "GET", pbs_path, "PBS")
    assert isinstance(refused, PveConnectionRefused) and "connection refused by pbs.lan:8007" in refused.message
    hint = advice(refused)
    assert "--pbs-url" in hint and "8007" in hint and "proxmox-backup-proxy" in hint and "8006" not in hint

    auth = map_error(rex(401, "authentication failure"), "GET", pbs_path, "PBS")
    assert "proxmox-backup-manager user list-tokens" in advice(auth) and "pveum" not in advice(auth)
    got = "cd" * 32
    pinned = map_error(
        requests.exceptions.SSLError(f'Fingerprints did not match. Expected "{"00" * 32}", got "{got}"'),
        "GET",
        pbs_path,
        "PBS",
    )
    assert "proxmox-backup-manager cert info" in advice(pinned) and "--pbs-fingerprint" in advice(pinned)
    untrusted = map_error(requests.exceptions.SSLError("certificate verify failed"), "GET", pbs_path, "PBS")
    assert "--pbs-ca-file" in advice(untrusted) and "pvenode" not in advice(untrusted)
    denied = PvePermissionError("Permission check failed (/datastore/main, Datastore.Audit)")
    denied.service = "PBS"
    assert "grant DatastoreAudit (proxmox-backup-manager acl update /datastore/main DatastoreAudit" in advice(denied)

    # the cluster's client keeps PVE's wording and advice
    pve = map_error(rex(501, "Method not implemented"), "GET", PATH)
    assert pve.service == "PVE" and "this PVE version" in pve.message
