"""RRD statistics of guests and storages, and the RRD graphs (pve-cluster src/PVE/RRD.pm create_rrd_data and
create_rrd_graph, called by pve-manager, qemu-server, pve-container and pve-storage ``rrd``/``rrddata``).

``rrddata`` answers one row per step of the timeframe: PVE 8 reads the ``pve2-*`` RRDs (day: 70 rows of
30 minutes, ...), PVE 9 the ``pve-*-9.0`` ones (day: 1440 rows of one minute, ...). A guest's row carries what
pvestatd writes for it (PVE 9 adds the host memory and the pressure stall columns), values around the guest's
current use. ``rrd`` renders a PNG: over /api2/json it is ``{filename, image}``, the image's bytes as text.
"""

from __future__ import annotations

import base64
from typing import Any

from pvesim.api.registry import ApiError, Call, route
from pvesim.scenario import major
from pvesim.state import Guest

# RRD.pm create_rrd_data: [resolution, rows] per timeframe, before and from PVE 9
_PVE2 = {"hour": (60, 60), "day": (1800, 70), "week": (10800, 70), "month": (43200, 70), "year": (604800, 70)}
_PVE9 = {
    "hour": (60, 60),
    "day": (60, 1440),
    "week": (1800, 336),
    "month": (1800, 1440),
    "year": (21600, 1440),
    "decade": (604800, 570),
}
# a 1x1 transparent PNG: what RRDs::graphv renders is 800x200, the form is the same
_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _steps(call: Call) -> list[int]:
    setup = _PVE9 if major(call.cluster.version) >= 9 else _PVE2
    reso, count = setup.get(str(call.params["timeframe"]), setup["day"])
    now = int(call.cluster.clock.now())
    end = reso * (now // reso)
    return [end - reso * (count - i) for i in range(count)]


def _jitter(i: int) -> float:
    return 1.05 if i % 2 else 0.95


def _guest_rows(call: Call, g: Guest) -> list[dict[str, Any]]:
    c = call.cluster
    running = g.status == "running" and c.nodes[g.node].online
    started = g.started_at or 0.0
    new = major(c.version) >= 9
    rows = []
    for i, t in enumerate(_steps(call)):
        up = running and t >= started
        row: dict[str, Any] = {
            "time": t,
            "maxcpu": g.maxcpu,
            "maxmem": g.maxmem,
            "maxdisk": g.maxdisk(),
            "disk": 0,
        }
        if up:
            j = _jitter(i)
            row.update(
                cpu=g.cpu_usage * j,
                mem=g.maxmem * g.mem_fraction * j,
                netin=12_000.0 * j,
                netout=9_000.0 * j,
                diskread=52_000.0 * j,
                diskwrite=20_000.0 * j,
            )
            if new:
                row.update(memhost=g.maxmem * g.mem_fraction * j)
                for key in ("pressurecpusome", "pressurecpufull", "pressureiosome", "pressureiofull"):
                    row[key] = 0.1 * j
                row.update(pressurememorysome=0.0, pressurememoryfull=0.0)
        rows.append(row)
    return rows


@route("GET", "/nodes/{node}/qemu/{vmid}/rrddata")
def qemu_rrddata(call: Call) -> list[dict[str, Any]]:
    """qemu-server API2/Qemu.pm rrddata: create_rrd_data of pve-vm-9.0/<vmid> (pve2-vm before PVE 9); the guest
    need not be on this node, the RRD is the cluster's."""
    return _guest_rows(call, _any_guest(call, "qemu"))


@route("GET", "/nodes/{node}/lxc/{vmid}/rrddata")
def lxc_rrddata(call: Call) -> list[dict[str, Any]]:
    return _guest_rows(call, _any_guest(call, "lxc"))


def _any_guest(call: Call, gtype: str) -> Guest:
    """An RRD file exists for a guest that exists (pvestatd writes it); RRD.pm dies on a missing file."""
    g = call.cluster.guests.get(int(call.params["vmid"]))
    if g is None or g.type != gtype:
        name = "pve-vm-9.0" if major(call.cluster.version) >= 9 else "pve2-vm"
        raise ApiError(
            500, f"RRD error: opening '/var/lib/rrdcached/db/{name}/{call.params['vmid']}': No such file or directory"
        )
    return g


@route("GET", "/nodes/{node}/storage/{storage}/rrddata")
def storage_rrddata(call: Call) -> list[dict[str, Any]]:
    """pve-storage API2/Storage/Status.pm rrddata: pve-storage-9.0/<node>/<storage>: total and used."""
    s = call.cluster.storages.get(call.params["storage"])
    if s is None:
        raise ApiError(400, "Parameter verification failed.", {"storage": "No such storage."})
    total, used = s.capacity(call.params["node"])
    return [
        {"time": t, "total": total, "used": used * _jitter(i) if i % 7 else used} for i, t in enumerate(_steps(call))
    ]


def _graph(call: Call, name: str) -> dict[str, Any]:
    """RRD.pm create_rrd_graph: the PNG's file name and its bytes (JSON carries them as text)."""
    ds = "_".join(str(call.params["ds"]).split(","))
    filename = f"/var/tmp/pve-rrd-{name.replace('/', '-')}-{ds}-{call.params['timeframe']}.png"
    return {"filename": filename, "image": _PNG.decode("latin-1")}


def _rrd_name(call: Call, kind: str, ident: str) -> str:
    return f"pve-{kind}-9.0/{ident}" if major(call.cluster.version) >= 9 else f"pve2-{kind}/{ident}"


@route("GET", "/nodes/{node}/rrd")
def node_rrd(call: Call) -> dict[str, Any]:
    return _graph(call, _rrd_name(call, "node", call.params["node"]))


@route("GET", "/nodes/{node}/qemu/{vmid}/rrd")
def qemu_rrd(call: Call) -> dict[str, Any]:
    _any_guest(call, "qemu")
    return _graph(call, _rrd_name(call, "vm", str(call.params["vmid"])))


@route("GET", "/nodes/{node}/lxc/{vmid}/rrd")
def lxc_rrd(call: Call) -> dict[str, Any]:
    _any_guest(call, "lxc")
    return _graph(call, _rrd_name(call, "vm", str(call.params["vmid"])))


@route("GET", "/nodes/{node}/storage/{storage}/rrd")
def storage_rrd(call: Call) -> dict[str, Any]:
    return _graph(call, _rrd_name(call, "storage", f"{call.params['node']}/{call.params['storage']}"))
