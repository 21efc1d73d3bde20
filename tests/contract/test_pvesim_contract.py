"""pvesim against Proxmox's published API schema: routes exist, parameters match, responses conform."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from pvesim import api as sim_api
from pvesim.apischema import ApiSchema, load_subset
from pvesim.server import SimServer
from tests.contract.schema_check import check_response

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "pve-api"
UPID = re.compile(r"^UPID:[^:]+:[0-9A-F]{8}:[0-9A-F]{8}:[0-9A-F]{8}:[^:]+:[^:]*:[^:]+:$")
# Routes that exist only from PVE 9 on (checked against the 8.4 schema in the test below).
PVE9_ONLY = {("GET", "/cluster/ha/rules"), ("GET", "/nodes/{node}/lxc/{vmid}/migrate")}
PVE9_ONLY |= {("GET", "/cluster/sdn/fabrics/fabric"), ("GET", "/nodes/{node}/sdn/fabrics/{fabric}/neighbors")}

# Where real PVE contradicts its own schema and pvesim follows real PVE (see shared pve-api notes).
KNOWN_DEVIATIONS = {
    "/nodes/{node}/lxc": re.compile(r"^GET /nodes/pve1/lxc\[\d+\]\.vmid: expected integer, got '\d+'$"),
    # listmon's host is the node's name on the wire; the 8.4/9.1 schema's "boolean" is wrong (pve-manager e8cbd1e7)
    "/nodes/{node}/ceph/mon": re.compile(r"^GET /nodes/pve1/ceph/mon\[\d+\]\.host: expected boolean, got '[\w-]+'$"),
}

# GETs that PVE 9 itself answers with an error on the demo (pve-ha-manager API2/HA/Groups.pm index: groups
# migrated to rules); their PVE 8 answer is checked in tests/integration/test_pve_truth.py.
EXPECTED_ERRORS = {"/cluster/ha/groups": (500, "migrated to rules")}

# Concrete path parameters on the demo scenario, per template (default: pve1 / VM 100).
PARAMS: dict[str, dict[str, str]] = {
    "/nodes/{node}/lxc/{vmid}/config": {"node": "pve1", "vmid": "120"},
    "/nodes/{node}/lxc/{vmid}/status/current": {"node": "pve1", "vmid": "120"},
    "/nodes/{node}/lxc/{vmid}/snapshot": {"node": "pve1", "vmid": "120"},
    "/nodes/{node}/lxc/{vmid}/migrate": {"node": "pve1", "vmid": "120"},
    "/nodes/{node}/lxc/{vmid}/pending": {"node": "pve1", "vmid": "120"},
    "/nodes/{node}/qemu/{vmid}/pending": {"node": "pve1", "vmid": "103"},
    "/nodes/{node}/replication/{id}/status": {"node": "pve3", "id": "112-0"},
    "/cluster/replication/{id}": {"id": "112-0"},
    "/nodes/{node}/storage/{storage}/status": {"node": "pve1", "storage": "local-lvm"},
    "/nodes/{node}/storage/{storage}/content": {"node": "pve1", "storage": "pbs-main"},
    "/cluster/ha/resources/{sid}": {"sid": "vm:101"},
    "/cluster/ceph/flags/{flag}": {"flag": "noout"},
    "/nodes/{node}/disks/smart": {"node": "pve3"},
    "/nodes/{node}/disks/zfs/{name}": {"node": "pve3", "name": "tank"},
    "/nodes/{node}/sdn/zones/{zone}/content": {"node": "pve2", "zone": "lab"},
    "/nodes/{node}/sdn/fabrics/{fabric}/neighbors": {"node": "pve1", "fabric": "fab1"},
    "/nodes/{node}/lxc/{vmid}/interfaces": {"node": "pve1", "vmid": "120"},
    "/cluster/sdn/vnets/{vnet}/subnets": {"vnet": "tenant1"},
}
# Required query parameters of a GET, per template.
QUERY: dict[str, dict[str, str]] = {
    "/nodes/{node}/ceph/cmd-safety": {"service": "osd", "id": "0", "action": "stop"},
    "/nodes/{node}/rrddata": {"timeframe": "day", "cf": "AVERAGE"},
    "/nodes/{node}/disks/smart": {"disk": "/dev/sdb"},
}


def _get_routes() -> list[str]:
    return sorted(t for m, t in sim_api.ROUTES if m == "GET")


def test_every_route_exists_in_the_official_schema() -> None:
    subset = load_subset()["versions"]
    for method, template in sim_api.ROUTES:
        assert f"{method} {template}" in subset["9.1"], f"{method} {template} is not in PVE 9.1's API"
        if (method, template) not in PVE9_ONLY:
            assert f"{method} {template}" in subset["8.4"], f"{method} {template} is not in PVE 8.4's API"
        else:
            assert f"{method} {template}" not in subset["8.4"]


@pytest.mark.skipif(not SHARED.exists(), reason="the shared copy of Proxmox's API schema is not on this machine")
def test_committed_subset_matches_the_official_schema() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_api_subset.py"), "--check", "--source", str(SHARED)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _fill(template: str, cluster: Any) -> str:
    values = dict(PARAMS.get(template, {}))
    values.setdefault("node", "pve1")
    values.setdefault("vmid", "100")
    if "{upid}" in template:
        values["node"] = "pve2"
        values["upid"] = next(t.upid for t in cluster.tasks if t.node == "pve2")
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


@pytest.fixture(scope="module")
def session(demo_sim: SimServer) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    s.verify = str(demo_sim.cert_path)
    full, secret = demo_sim.token("root@pam!pvesim")
    s.headers["Authorization"] = f"PVEAPIToken={full}={secret}"
    return s


@pytest.mark.parametrize("template", _get_routes())
def test_get_responses_follow_the_schema(template: str, demo_sim: SimServer, session: requests.Session) -> None:
    schema = ApiSchema("9.1")
    path = _fill(template, demo_sim.cluster)
    resp = session.get(f"{demo_sim.url}/api2/json{path}", params=QUERY.get(template))
    if template in EXPECTED_ERRORS:
        status, text = EXPECTED_ERRORS[template]
        assert resp.status_code == status and text in resp.reason, (resp.status_code, resp.reason)
        return
    assert resp.status_code == 200, f"{path}: {resp.status_code} {resp.reason}"
    body = resp.json()
    assert set(body) == {"data"}
    problems = check_response(body["data"], schema.methods[("GET", template)].returns, f"GET {path}")
    known = KNOWN_DEVIATIONS.get(template)
    if known is not None:
        assert problems and all(known.match(p) for p in problems), problems
    else:
        assert problems == []


def test_task_starters_return_upids(start_sim: Any) -> None:
    sim = start_sim("demo")
    s = requests.Session()
    s.trust_env = False
    full, secret = sim.token("root@pam!pvesim")
    s.headers["Authorization"] = f"PVEAPIToken={full}={secret}"
    schema = ApiSchema("9.1")
    calls = [
        ("POST", "/nodes/pve2/qemu/109/status/start", {}),
        ("POST", "/nodes/pve1/lxc/120/status/reboot", {}),
        ("POST", "/nodes/pve1/qemu/100/snapshot", {"snapname": "contract"}),
        ("POST", "/nodes/pve1/qemu/103/migrate", {"target": "pve2", "online": "1"}),
        ("POST", "/nodes/pve3/vzdump", {"vmid": "114", "storage": "pbs-main"}),
    ]
    for method, path, data in calls:
        resp = s.request(method, f"{sim.url}/api2/json{path}", data=data, verify=str(sim.cert_path))
        assert resp.status_code == 200, (path, resp.reason)
        upid = resp.json()["data"]
        assert UPID.match(upid), upid
        template = schema.match(method, path)
        assert template is not None and check_response(upid, template[0].returns, path) == []


# ---------------------------------------------------------------- the checker catches drift


def test_checker_flags_missing_and_mistyped_fields(demo_sim: SimServer, session: requests.Session) -> None:
    schema = ApiSchema("9.1")
    returns = schema.methods[("GET", "/nodes/{node}/tasks/{upid}/status")].returns
    upid = next(t.upid for t in demo_sim.cluster.tasks if t.node == "pve2")
    good = session.get(f"{demo_sim.url}/api2/json/nodes/pve2/tasks/{upid}/status").json()["data"]
    assert check_response(good, returns, "status") == []
    missing = copy.deepcopy(good)
    del missing["pstart"]
    assert check_response(missing, returns, "status") == ["status: required field 'pstart' missing"]
    mistyped = dict(good, pid=str(good["pid"]))
    assert check_response(mistyped, returns, "status") == [f"status.pid: expected integer, got '{good['pid']}'"]
    rows = session.get(f"{demo_sim.url}/api2/json/cluster/resources").json()["data"]
    bad_rows = copy.deepcopy(rows)
    bad_rows[0]["maxmem"] = "lots"
    resources = schema.methods[("GET", "/cluster/resources")].returns
    assert check_response(bad_rows, resources, "res") == ["res[0].maxmem: expected integer, got 'lots'"]


def test_route_check_would_flag_an_invented_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sim_api.ROUTES, ("POST", "/nodes/{node}/maintenance"), lambda call: None)
    with pytest.raises(AssertionError, match=re.escape("POST /nodes/{node}/maintenance is not in PVE 9.1's API")):
        test_every_route_exists_in_the_official_schema()


def test_subset_file_is_valid_json_with_both_releases() -> None:
    data = json.loads((ROOT / "src" / "pvesim" / "data" / "api-subset.json").read_text())
    assert sorted(data["versions"]) == ["8.4", "9.1"]
