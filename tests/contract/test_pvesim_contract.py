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

import pvesim
from pvesim import api as sim_api
from pvesim.apischema import ApiSchema, load_subset
from pvesim.app import Simulator
from pvesim.server import SimServer
from tests.contract import pvesim_calls
from tests.contract.schema_check import check_response

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "pve-api"
UPID = re.compile(r"^UPID:[^:]+:[0-9A-F]{8}:[0-9A-F]{8}:[0-9A-F]{8}:[^:]+:[^:]*:[^:]+:$")

# Where real PVE contradicts its own schema and pvesim follows real PVE (see shared pve-api notes).
KNOWN_DEVIATIONS = {
    "/nodes/{node}/lxc": re.compile(r"^GET /nodes/[\w-]+/lxc\[\d+\]\.vmid: expected integer, got '\d+'$"),
    # listmon's host is the node's name on the wire; the 8.4/9.1 schema's "boolean" is wrong (pve-manager e8cbd1e7)
    "/nodes/{node}/ceph/mon": re.compile(r"^GET /nodes/[\w-]+/ceph/mon\[\d+\]\.host: expected boolean, got '[\w-]+'$"),
    # Cluster.pm nextid: the id was a hash key last (``$idlist->{$i}``), so JSON::XS writes it as a string
    "/cluster/nextid": re.compile(r"^GET /cluster/nextid: expected integer, got '\d+'$"),
    # pve-manager API2/Cluster/Mapping/*.pm index: ``description`` only when set, ``error`` only with check-node
    "/cluster/mapping/pci": re.compile(r"^GET /cluster/mapping/pci\[\d+\]: required field 'description' missing$"),
    "/cluster/mapping/usb": re.compile(
        r"^GET /cluster/mapping/usb\[\d+\]: required field '(description|error)' missing$"
    ),
    "/cluster/mapping/dir": re.compile(r"^GET /cluster/mapping/dir\[\d+\]: required field 'description' missing$"),
    # pve-container PVE/LXC.pm get_interfaces returns nothing for a stopped container: the data is null
    "/nodes/{node}/lxc/{vmid}/interfaces": re.compile(
        r"^GET /nodes/[\w-]+/lxc/\d+/interfaces: expected array, got NoneType$"
    ),
}

# GETs that PVE 9 itself answers with an error on the demo (pve-ha-manager API2/HA/Groups.pm index: groups
# migrated to rules); their PVE 8 answer is checked in tests/integration/test_pve_truth.py.
EXPECTED_ERRORS = {"/cluster/ha/groups": (500, "migrated to rules")}

# Concrete path parameters on the demo scenario, per template (default: pve1 / VM 100): the GETs also checked
# over HTTPS, through the real wire.
PARAMS_HTTP: dict[str, dict[str, str]] = {
    "/version": {},
    "/cluster/resources": {},
    "/nodes/{node}/status": {},
    "/nodes/{node}/qemu/{vmid}/status/current": {},
    "/nodes/{node}/tasks/{upid}/log": {},
    "/nodes/{node}/syslog": {},
}
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
}
# Required query parameters of a GET, per template.
QUERY: dict[str, dict[str, str]] = {
    "/nodes/{node}/ceph/cmd-safety": {"service": "osd", "id": "0", "action": "stop"},
    "/nodes/{node}/rrddata": {"timeframe": "day", "cf": "AVERAGE"},
    "/nodes/{node}/disks/smart": {"disk": "/dev/sdb"},
}


def _get_routes() -> list[str]:
    return sorted(t for m, t in sim_api.ROUTES if m == "GET" and t in PARAMS_HTTP)


# GETs of PVE 8.4 or 9.1 that pvesim does not answer (it answers 501 for them, which PVE never does). The list may
# only shrink: a GET added to PVE's schema, or a handler removed, fails test_every_get_of_the_schema_is_served.
UNSERVED: dict[str, str] = {
    "/cluster/acme/account": "not yet served",
    "/cluster/acme/account/{name}": "not yet served",
    "/cluster/acme/challenge-schema": "not yet served",
    "/cluster/acme/directories": "not yet served",
    "/cluster/acme/meta": "not yet served",
    "/cluster/acme/plugins": "not yet served",
    "/cluster/acme/plugins/{id}": "not yet served",
    "/cluster/acme/tos": "not yet served",
    "/cluster/jobs/realm-sync": "not yet served",
    "/cluster/jobs/realm-sync/{id}": "not yet served",
    "/cluster/jobs/schedule-analyze": "not yet served",
    "/cluster/mapping/dir/{id}": "not yet served",
    "/cluster/mapping/pci/{id}": "not yet served",
    "/cluster/mapping/usb/{id}": "not yet served",
    "/cluster/metrics/export": "not yet served",
    "/cluster/notifications/endpoints/gotify": "not yet served",
    "/cluster/notifications/endpoints/gotify/{name}": "not yet served",
    "/cluster/notifications/endpoints/sendmail": "not yet served",
    "/cluster/notifications/endpoints/sendmail/{name}": "not yet served",
    "/cluster/notifications/endpoints/smtp": "not yet served",
    "/cluster/notifications/endpoints/smtp/{name}": "not yet served",
    "/cluster/notifications/endpoints/webhook": "not yet served",
    "/cluster/notifications/endpoints/webhook/{name}": "not yet served",
    "/cluster/notifications/matcher-field-values": "not yet served",
    "/cluster/notifications/matcher-fields": "not yet served",
    "/cluster/notifications/matchers": "not yet served",
    "/cluster/notifications/matchers/{name}": "not yet served",
    "/cluster/notifications/targets": "not yet served",
    "/cluster/sdn/controllers/{controller}": "not yet served",
    "/cluster/sdn/dns": "not yet served",
    "/cluster/sdn/dns/{dns}": "not yet served",
    "/cluster/sdn/dry-run": "not yet served",
    "/cluster/sdn/fabrics/all": "not yet served",
    "/cluster/sdn/fabrics/fabric/{id}": "not yet served",
    "/cluster/sdn/fabrics/node": "not yet served",
    "/cluster/sdn/fabrics/node/{fabric_id}": "not yet served",
    "/cluster/sdn/fabrics/node/{fabric_id}/{node_id}": "not yet served",
    "/cluster/sdn/ipams": "not yet served",
    "/cluster/sdn/ipams/{ipam}": "not yet served",
    "/cluster/sdn/ipams/{ipam}/status": "not yet served",
    "/cluster/sdn/vnets/{vnet}": "not yet served",
    "/cluster/sdn/vnets/{vnet}/firewall": "not yet served",
    "/cluster/sdn/vnets/{vnet}/firewall/options": "not yet served",
    "/cluster/sdn/vnets/{vnet}/firewall/rules": "not yet served",
    "/cluster/sdn/vnets/{vnet}/firewall/rules/{pos}": "not yet served",
    "/cluster/sdn/vnets/{vnet}/subnets": "not yet served",
    "/cluster/sdn/vnets/{vnet}/subnets/{subnet}": "not yet served",
    "/cluster/sdn/zones/{zone}": "not yet served",
    "/nodes/{node}/aplinfo": "not yet served",
    "/nodes/{node}/apt/changelog": "not yet served",
    "/nodes/{node}/capabilities/qemu/cpu": "not yet served",
    "/nodes/{node}/capabilities/qemu/cpu-flags": "not yet served",
    "/nodes/{node}/capabilities/qemu/migration": "not yet served",
    "/nodes/{node}/ceph/cfg/db": "not yet served",
    "/nodes/{node}/ceph/cfg/value": "not yet served",
    "/nodes/{node}/ceph/crush": "not yet served",
    "/nodes/{node}/ceph/fs": "not yet served",
    "/nodes/{node}/ceph/log": "not yet served",
    "/nodes/{node}/ceph/osd/{osdid}/lv-info": "not yet served",
    "/nodes/{node}/ceph/osd/{osdid}/metadata": "not yet served",
    "/nodes/{node}/ceph/pool/{name}/status": "not yet served",
    "/nodes/{node}/ceph/rules": "not yet served",
    "/nodes/{node}/disks/directory": "not yet served",
    "/nodes/{node}/disks/lvm": "not yet served",
    "/nodes/{node}/hardware/pci/{pci-id-or-mapping}/mdev": "not yet served",
    "/nodes/{node}/hardware/usb": "not yet served",
    "/nodes/{node}/lxc/{vmid}/feature": "not yet served",
    "/nodes/{node}/lxc/{vmid}/mtunnelwebsocket": "not yet served",
    "/nodes/{node}/lxc/{vmid}/rrd": "not yet served",
    "/nodes/{node}/lxc/{vmid}/rrddata": "not yet served",
    "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config": "not yet served",
    "/nodes/{node}/lxc/{vmid}/vncwebsocket": "not yet served",
    "/nodes/{node}/netstat": "not yet served",
    "/nodes/{node}/network/{iface}": "not yet served",
    "/nodes/{node}/qemu/{vmid}/cloudinit": "not yet served",
    "/nodes/{node}/qemu/{vmid}/cloudinit/dump": "not yet served",
    "/nodes/{node}/qemu/{vmid}/feature": "not yet served",
    "/nodes/{node}/qemu/{vmid}/mtunnelwebsocket": "not yet served",
    "/nodes/{node}/qemu/{vmid}/rrd": "not yet served",
    "/nodes/{node}/qemu/{vmid}/rrddata": "not yet served",
    "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config": "not yet served",
    "/nodes/{node}/qemu/{vmid}/vncwebsocket": "not yet served",
    "/nodes/{node}/query-oci-repo-tags": "not yet served",
    "/nodes/{node}/query-url-metadata": "not yet served",
    "/nodes/{node}/replication/{id}/log": "not yet served",
    "/nodes/{node}/report": "not yet served",
    "/nodes/{node}/rrd": "not yet served",
    "/nodes/{node}/scan/cifs": "not yet served",
    "/nodes/{node}/scan/glusterfs": "not yet served",
    "/nodes/{node}/scan/iscsi": "not yet served",
    "/nodes/{node}/scan/lvm": "not yet served",
    "/nodes/{node}/scan/lvmthin": "not yet served",
    "/nodes/{node}/scan/nfs": "not yet served",
    "/nodes/{node}/scan/pbs": "not yet served",
    "/nodes/{node}/scan/zfs": "not yet served",
    "/nodes/{node}/sdn/fabrics/{fabric}/interfaces": "not yet served",
    "/nodes/{node}/sdn/fabrics/{fabric}/routes": "not yet served",
    "/nodes/{node}/sdn/vnets/{vnet}/mac-vrf": "not yet served",
    "/nodes/{node}/sdn/zones/{zone}/bridges": "not yet served",
    "/nodes/{node}/sdn/zones/{zone}/ip-vrf": "not yet served",
    "/nodes/{node}/services/{service}/state": "not yet served",
    "/nodes/{node}/storage/{storage}/content/{volume}": "not yet served",
    "/nodes/{node}/storage/{storage}/file-restore/download": "not yet served",
    "/nodes/{node}/storage/{storage}/file-restore/list": "not yet served",
    "/nodes/{node}/storage/{storage}/import-metadata": "not yet served",
    "/nodes/{node}/storage/{storage}/prunebackups": "not yet served",
    "/nodes/{node}/storage/{storage}/rrd": "not yet served",
    "/nodes/{node}/storage/{storage}/rrddata": "not yet served",
    "/nodes/{node}/vncwebsocket": "not yet served",
    "/nodes/{node}/vzdump/extractconfig": "not yet served",
}

# the scenarios and releases every GET is sent to in process: each built-in scenario as it is, and on the
# other major release
SCENARIOS = [(name, version) for name in pvesim.builtin_scenarios() for version in (None, "8.4.14", "9.1.2")]
# what the field-coverage test requires of the documented ``returns`` fields of every served GET (issue 45)
COVERAGE_TARGET = 0.56


def _schema_gets() -> set[str]:
    subset = load_subset()["versions"]
    return {key.split(" ", 1)[1] for version in subset.values() for key in version if key.startswith("GET ")}


def test_every_get_of_the_schema_is_served() -> None:
    served = {t for m, t in sim_api.ROUTES if m == "GET"}
    unserved = _schema_gets() - served
    new = sorted(unserved - set(UNSERVED))
    assert not new, f"GETs of PVE's schema that pvesim answers with 501: {new}"
    stale = sorted(set(UNSERVED) - unserved)
    assert not stale, f"served now, take them off UNSERVED: {stale}"


def test_every_route_exists_in_the_official_schema() -> None:
    subset = load_subset()["versions"]
    for method, template in sim_api.ROUTES:
        key = f"{method} {template}"
        # a route of one release only answers 501 on the other: the pipeline matches the release's own schema
        assert key in subset["9.1"] or key in subset["8.4"], f"{key} is not in PVE's API (8.4 or 9.1)"


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
    values = dict(PARAMS.get(template, {})) | PARAMS_HTTP.get(template, {})
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
    assert set(body) <= {"data", "total"} and "data" in body
    problems = check_response(body["data"], schema.methods[("GET", template)].returns, f"GET {path}")
    known = KNOWN_DEVIATIONS.get(template)
    if known is not None:
        assert problems and all(known.match(p) for p in problems), problems
    else:
        assert problems == []


# ---------------------------------------------------------------- every GET, in process, on every scenario


class _Answers:
    """Every GET of the schema sent to every scenario: the answers' problems and the fields they carried."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.documented: dict[str, set[str]] = {}
        self.present: dict[str, set[str]] = {}
        self.answered: set[str] = set()  # templates with at least one 200 answer
        self.calls = 0


def _send_everything() -> _Answers:
    out = _Answers()
    served = sorted({t for m, t in sim_api.ROUTES if m == "GET"})
    for scenario, version in SCENARIOS:
        cluster = pvesim.build_cluster(pvesim.load_scenario(scenario), version=version, speed=10_000.0)
        sim = Simulator(cluster)
        for template in served:
            if not sim.schema.has("GET", template):
                continue
            returns = sim.schema.methods[("GET", template)].returns
            out.documented.setdefault(template, pvesim_calls.documented(returns))
            for path, query in pvesim_calls.calls(cluster, sim.schema, template):
                out.calls += 1
                answer = sim.request("GET", path, query)
                where = f"{scenario}/{cluster.version} GET {path}"
                if answer.status == 501:
                    out.problems.append(f"{where}: 501 {answer.reason}")
                    continue
                if answer.status != 200 or answer.body is None:
                    continue
                out.answered.add(template)
                problems = check_response(answer.body["data"], returns, f"GET {path}")
                known = KNOWN_DEVIATIONS.get(template)
                out.problems += [f"{where}: {p}" for p in problems if not (known and known.match(p))]
                out.present.setdefault(template, set()).update(pvesim_calls.present(answer.body["data"], returns))
    return out


@pytest.fixture(scope="module")
def answers() -> _Answers:
    return _send_everything()


def test_every_get_answers_like_pve_on_every_scenario(answers: _Answers) -> None:
    """No 501 for a path PVE has, and every 200 answer has the documented fields with their types."""
    assert answers.calls > 500
    assert answers.problems == []


def test_field_coverage_of_the_schemas_returns(answers: _Answers, record_property: Any) -> None:
    """The share of the fields PVE's schema documents in ``returns`` that pvesim's answers carry, over every
    served GET answered on some scenario (issue 45: at least 95 %)."""
    total = sum(len(answers.documented[t]) for t in answers.answered)
    seen = sum(len(answers.documented[t] & answers.present.get(t, set())) for t in answers.answered)
    share = seen / total if total else 0.0
    gaps = {
        t: sorted(answers.documented[t] - answers.present.get(t, set()))
        for t in sorted(answers.answered)
        if answers.documented[t] - answers.present.get(t, set())
    }
    never = sorted(set(answers.documented) - answers.answered)
    record_property("pvesim_field_coverage", f"{share:.4f}")
    print(f"\npvesim field coverage: {seen}/{total} = {share:.1%} of documented returns fields")
    print(f"served GETs never answered 200 on any scenario: {len(never)}")
    assert share >= COVERAGE_TARGET, (share, gaps, never)


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
    with pytest.raises(AssertionError, match=re.escape("POST /nodes/{node}/maintenance is not in PVE's API")):
        test_every_route_exists_in_the_official_schema()


def test_subset_file_is_valid_json_with_both_releases() -> None:
    data = json.loads((ROOT / "src" / "pvesim" / "data" / "api-subset.json").read_text())
    assert sorted(data["versions"]) == ["8.4", "9.1"]
