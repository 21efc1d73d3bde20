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
    # pve-storage Diskmanage.pm get_disks: 'mounted' only when the disk is, 'osdid-list' undef without an OSD
    "/nodes/{node}/disks/list": re.compile(
        r"^GET /nodes/[\w-]+/disks/list\[\d+\]"
        r"(: required field 'mounted' missing|\.osdid-list: expected array, got None)$"
    ),
    # pve-network API2/Network/SDN/{Zones,Vnets,Controllers}.pm: ``digest`` is the file's, which the pending and
    # running views have none of: the key comes with a null value; PVE 8's schema calls ``pending`` a boolean,
    # but pending_config puts the changed keys there as an object (stable-bookworm Zones.pm encodes its nodes)
    **{
        f"/cluster/sdn/{kind}": re.compile(
            rf"^GET /cluster/sdn/{kind}(/[\w-]+)?(\[\d+\])?"
            rf"(\.digest: expected string, got None|\.pending: expected boolean, got \{{.*\}})$"
        )
        for kind in ("zones", "vnets", "controllers")
    },
    **{
        f"/cluster/sdn/{kind}/{{{key}}}": re.compile(
            rf"^GET /cluster/sdn/{kind}/[\w-]+"
            rf"(\.digest: expected string, got None|\.pending: expected boolean, got \{{.*\}})$"
        )
        for kind, key in (("zones", "zone"), ("vnets", "vnet"), ("controllers", "controller"))
    },
    # VZDump.pm read_vzdump_defaults parses fleecing and performance into objects and API2/VZDump.pm defaults
    # joins exclude-path (and mailto) into one string, while json_config_properties documents the
    # property-string types
    "/nodes/{node}/vzdump/defaults": re.compile(
        r"^GET /nodes/[\w-]+/vzdump/defaults\.((fleecing|performance): expected string, got \{.*\}"
        r"|exclude-path: expected array, got '.*')$"
    ),
    # Ceph/Pool.pm lspools and getpool copy pg_num_min, target_size(_bytes) and target_size_ratio from what Ceph
    # reports, which leaves them out unless set: the keys come with a null value; getpool's schema takes
    # target_size for the size string pool creation accepts, but the value is Ceph's target_size_bytes
    **{
        t: re.compile(
            r"^GET /nodes/[\w-]+/ceph/pool(\[\d+\]|/[\w.-]+/status)\.(pg_num_min|target_size|target_size_ratio): "
            r"expected (integer|number|string), got (None|\d+)$"
        )
        for t in ("/nodes/{node}/ceph/pool", "/nodes/{node}/ceph/pool/{name}/status")
    },
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
    "/cluster/sdn/vnets/{vnet}/subnets": {"vnet": "tenant1"},
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
UNSERVED: dict[str, str] = {}

# served GETs no call of the contract tests gets a 200 for, and why (may only shrink): an API token never
# passes a root@pam-only method (RPCEnvironment check_api2_permissions: no ``permissions`` means root@pam, and
# a token's user is '<user>!<token>'), and the websockets want a ticket from a POST read-only clients do not make
NEVER_200: dict[str, str] = {
    **dict.fromkeys(
        ("/cluster/acme/account/{name}", "/cluster/backup-info", "/cluster/sdn/vnets/{vnet}/firewall"),
        "root@pam only (no permissions): every API token gets 403 'Permission check failed (user != root@pam)'",
    ),
    **dict.fromkeys(
        (
            "/nodes/{node}/vncwebsocket",
            "/nodes/{node}/qemu/{vmid}/vncwebsocket",
            "/nodes/{node}/lxc/{vmid}/vncwebsocket",
            "/nodes/{node}/qemu/{vmid}/mtunnelwebsocket",
            "/nodes/{node}/lxc/{vmid}/mtunnelwebsocket",
        ),
        "a websocket upgrade with the ticket of a vncproxy/termproxy/mtunnel POST: 401 without one",
    ),
}

# the scenarios and releases every GET is sent to in process: each built-in scenario as it is, and on the
# other major release
SCENARIOS = [(name, version) for name in pvesim.builtin_scenarios() for version in (None, "8.4.14", "9.1.2")]
# what the field-coverage test requires of the documented ``returns`` fields of every served GET (issue 45)
COVERAGE_TARGET = 0.95


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


@pytest.mark.parametrize("version", sorted(load_subset()["versions"]))
def test_a_path_matches_the_route_the_whole_table_would_give(version: str) -> None:
    """The routes are tried by depth (apischema.ApiSchema._candidates): every template's path, with one-segment
    and two-segment values, and paths of no route, match as a scan of the whole table in its order does."""
    schema = ApiSchema(version)
    paths = {"/", "/x/y/z", "/nodes/pve1/storage/local/content/local:backup/vzdump-qemu-100.vma.zst"}
    for _, template in schema.methods:
        paths |= {re.sub(r"\{[^}]+\}", value, template) for value in ("pve1", "a/b", "10.0.0.0/8")}
    for path in sorted(paths):
        for method in ("GET", "POST", "PUT", "DELETE"):
            expected = None
            for template, rx in schema._routes:  # the whole table, in its order
                found = rx.match(path)
                if found and (method, template) in schema.methods:
                    names = re.findall(r"\{([^}]+)\}", template)
                    expected = (schema.methods[(method, template)], dict(zip(names, found.groups(), strict=True)))
                    break
            assert schema.match(method, path) == expected, (method, path)


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
            out.documented.setdefault(template, set()).update(pvesim_calls.documented(returns))
            for path, query in pvesim_calls.calls(cluster, sim.schema, template):
                out.calls += 1
                answer = sim.request("GET", path, query)
                where = f"{scenario}/{cluster.version} GET {path}"
                if answer.status == 501:
                    out.problems.append(f"{where}: 501 {answer.reason}")
                    continue
                if answer.status == 200 and answer.download is not None:  # a file (journal, file-restore)
                    out.answered.add(template)
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
    record_property("pvesim_field_coverage", f"{share:.4f}")
    print(f"\npvesim field coverage: {seen}/{total} = {share:.1%} of documented returns fields")
    assert share >= COVERAGE_TARGET, (share, gaps)


def test_every_served_get_answers_200_somewhere(answers: _Answers) -> None:
    """Every served GET gets a 200 on some scenario, so that its fields count, unless NEVER_200 says why no
    read-only client ever gets one; the list may only shrink."""
    never = set(answers.documented) - answers.answered
    assert never - set(NEVER_200) == set(), "GETs no scenario answers with 200"
    assert set(NEVER_200) - never == set(), "these now answer 200: remove them from NEVER_200"


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
