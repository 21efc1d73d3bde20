"""The official PVE API schema, as pvesim enforces it.

``data/api-subset.json`` holds, per PVE release, the methods pvesim serves, copied from
Proxmox's published API viewer data (see ``data/ATTRIBUTION.md``; regenerate it with
``scripts/gen_api_subset.py``). From it pvesim takes route matching, parameter validation
(types, enums, ranges, formats, required, no extra properties) and the permission check
expression of every method, so the simulator refuses exactly what PVE would refuse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pvesim.formats import check_format

_INDEXED = re.compile(r"^([a-z]+)(\d+)$")


@dataclass(frozen=True)
class MethodSpec:
    method: str
    path: str  # template, e.g. /nodes/{node}/qemu/{vmid}/config
    spec: dict[str, Any]

    @property
    def permissions(self) -> dict[str, Any]:
        return dict(self.spec.get("permissions") or {})

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        return dict((self.spec.get("parameters") or {}).get("properties") or {})

    @property
    def proxied(self) -> bool:
        return self.spec.get("proxyto") == "node"

    @property
    def returns(self) -> dict[str, Any]:
        return dict(self.spec.get("returns") or {})


class ParamError(Exception):
    """HTTP 400 'Parameter verification failed.' with PVE's per-parameter messages."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("Parameter verification failed.")
        self.errors = errors


@cache
def load_subset() -> dict[str, Any]:
    text = resources.files("pvesim").joinpath("data/api-subset.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def schema_paths(version: str) -> frozenset[str]:
    """Every path of the release's API, whatever its methods."""
    return frozenset(load_subset().get("paths", {}).get(version, ()))


def schema_versions() -> list[str]:
    return sorted(load_subset()["versions"])


class ApiSchema:
    """Route table and validators for one PVE release."""

    def __init__(self, version: str) -> None:
        versions = load_subset()["versions"]
        if version not in versions:
            raise ValueError(f"no API schema for PVE {version}; have {sorted(versions)}")
        self.version = version
        self.methods: dict[tuple[str, str], MethodSpec] = {}
        for key, spec in versions[version].items():
            method, path = key.split(" ", 1)
            self.methods[(method, path)] = MethodSpec(method, path, spec)
        templates = sorted({p for _, p in self.methods}, key=lambda p: (p.count("{"), -len(p)))
        self._routes = [(t, _route_regex(t)) for t in templates]
        self._matched: dict[tuple[str, str], tuple[MethodSpec, dict[str, str]] | None] = {}
        self._by_depth: dict[int, list[tuple[str, re.Pattern[str]]]] = {}
        self.paths = schema_paths(version)  # every path, any method

    def match(self, method: str, path: str) -> tuple[MethodSpec, dict[str, str]] | None:
        key = (method, path)
        if key in self._matched:
            found = self._matched[key]
            return (found[0], dict(found[1])) if found else None
        result = None
        for template, rx in self._candidates(path.count("/")):
            m = rx.match(path)
            if m and (method, template) in self.methods:
                names = re.findall(r"\{([^}]+)\}", template)
                result = (self.methods[(method, template)], dict(zip(names, m.groups(), strict=True)))
                break
        if len(self._matched) < 100_000:
            self._matched[key] = result
        return (result[0], dict(result[1])) if result else None

    def _candidates(self, depth: int) -> list[tuple[str, re.Pattern[str]]]:
        """The routes a path of ``depth`` slashes can match, in the table's order: those of as many segments,
        and those whose last parameter takes the rest of the path (a 2,000-guest cluster's config paths each
        tried all 347 routes)."""
        found = self._by_depth.get(depth)
        if found is None:
            found = self._by_depth[depth] = [
                (t, rx)
                for t, rx in self._routes
                if t.count("/") == depth or (_WHOLE_REST.search(t) is not None and t.count("/") <= depth)
            ]
        return found

    def has(self, method: str, template: str) -> bool:
        return (method, template) in self.methods


@cache
def _perl_regex(pattern: str) -> re.Pattern[str]:
    """A schema pattern as Perl stringified it: ``(?^:...)`` and ``(?^i:...)`` are Python's ``(?:...)`` and
    ``(?i:...)``."""
    return re.compile(re.sub(r"\(\?\^([a-z]*):", lambda m: f"(?{m.group(1)}:" if m.group(1) else "(?:", pattern))


# subclasses registered with ``fragmentDelimiter => ''`` (RESTHandler.pm map_path_to_methods joins the rest of
# the path into one component): pve-storage Status.pm for content (volume ids carry a '/'), pve-firewall
# IPSet.pm for the ipsets (so do CIDRs)
_WHOLE_REST = re.compile(r"(/storage/\{storage\}/content|/firewall/ipset/\{name\})/\{[^}]+\}$")


def _route_regex(template: str) -> re.Pattern[str]:
    """A template's path parameters (some carry dashes: ``{pci-id-or-mapping}``) as one segment each, but the
    last one behind a fragment delimiter takes the rest of the path."""
    parts = re.split(r"\{[^}]+\}", template)
    rx = "([^/]+)".join(re.escape(p) for p in parts)
    if _WHOLE_REST.search(template):
        rx = rx[: rx.rindex("([^/]+)")] + "(.+)"
    return re.compile("^" + rx + "$")


def _prop_for(props: dict[str, dict[str, Any]], name: str) -> dict[str, Any] | None:
    if name in props:
        return props[name]
    m = _INDEXED.match(name)
    if m:
        return props.get(f"{m.group(1)}[n]")
    return None


def _check_value(name: str, value: Any, prop: dict[str, Any]) -> tuple[Any, str | None]:
    ptype = prop.get("type", "string")
    if ptype == "boolean":
        if isinstance(value, bool):
            return int(value), None
        if str(value) in ("0", "1"):
            return int(value), None
        return value, f"type check ('boolean') failed - got '{value}'"
    if ptype == "integer":
        text = str(value)
        if isinstance(value, bool) or not re.fullmatch(r"[+-]?\d+", text):
            return value, f"type check ('integer') failed - got '{value}'"
        value = int(text)
    elif ptype == "number":
        try:
            value = float(value)
        except (TypeError, ValueError):
            return value, f"type check ('number') failed - got '{value}'"
    elif ptype == "array":
        return value if isinstance(value, list) else [value], None
    elif ptype == "object":
        return value, None
    else:
        value = str(value)
    if "enum" in prop and str(value) not in [str(e) for e in prop["enum"]]:
        return value, f"value '{value}' does not have a value in the enumeration '{', '.join(map(str, prop['enum']))}'"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in prop and value < prop["minimum"]:
            return value, f"value must have a minimum value of {prop['minimum']}"
        if "maximum" in prop and value > prop["maximum"]:
            return value, f"value must have a maximum value of {prop['maximum']}"
    if isinstance(value, str):
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            return value, f"value may only be {prop['maxLength']} characters long"
        if "minLength" in prop and len(value) < prop["minLength"]:
            return value, f"value must be at least {prop['minLength']} characters long"
        if "pattern" in prop and not _perl_regex(prop["pattern"]).fullmatch(value):
            return value, "value does not match the regex pattern"
        fmt = prop.get("format")
        if isinstance(fmt, str):
            msg = check_format(fmt, value)
            if msg:
                return value, msg
    return value, None


def validate(spec: MethodSpec, params: dict[str, Any]) -> dict[str, Any]:
    """Type-convert and validate request parameters; raise ParamError with PVE's messages."""
    props = spec.properties
    allow_extra = bool((spec.spec.get("parameters") or {}).get("additionalProperties", 0))
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    for name, value in params.items():
        prop = _prop_for(props, name)
        if prop is None:
            if not allow_extra:
                errors[name] = "property is not defined in schema and the schema does not allow additional properties"
            continue
        converted, err = _check_value(name, value, prop)
        if err:
            errors[name] = err
        else:
            out[name] = converted
    for name, prop in props.items():
        if "[n]" in name:
            continue
        if not prop.get("optional") and name not in params:
            errors[name] = "property is missing and it is not optional"
    if errors:
        raise ParamError(errors)
    return out


class PermissionDenied(Exception):
    """HTTP 403: pve-common PVE/Exception.pm raise_perm_exc, 'Permission check failed[ (<what>)]\n'."""

    def __init__(self, what: str = "") -> None:
        super().__init__(f"Permission check failed ({what})\n" if what else "Permission check failed\n")


def check_permissions(permissions: dict[str, Any] | None, token: Any, params: dict[str, Any], access: Any) -> None:
    """pve-access-control RPCEnvironment.pm check_api2_permissions for an API token: a method without
    permissions is root@pam's alone (a token is 'user@realm!name', never root@pam itself), ``user: all``
    lets every authenticated caller in, else the ``check`` expression decides."""
    if permissions is None:
        raise PermissionDenied("user != root@pam")
    if permissions.get("user") in ("all", "world"):
        return
    if not permissions.get("check"):
        raise PermissionDenied()
    _exec_check(permissions["check"], token, params, access, noerr=False)


def _exec_check(check: list[Any], token: Any, params: dict[str, Any], access: Any, noerr: bool) -> bool:
    """RPCEnvironment.pm exec_api2_perm_check: ``and``, ``or`` (fails as a bare 'Permission check failed'),
    ``perm`` (``any``, ``require_param``), ``userid-param`` and ``userid-group``; ``noerr`` answers False."""
    kind = check[0]
    if kind == "and":
        return all(_exec_check(sub, token, params, access, noerr) for sub in check[1:])
    if kind == "or":
        if any(_exec_check(sub, token, params, access, True) for sub in check[1:]):
            return True
        if noerr:
            return False
        raise PermissionDenied()
    if kind == "perm":
        options = dict(zip(check[3::2], check[4::2], strict=False))
        if options.get("require_param") and params.get(options["require_param"]) is None:
            if noerr:
                return False
            raise PermissionDenied()
        path = _normalize(re.sub(r"\{(\w+)\}", lambda m: str(params.get(m.group(1), "")), check[1]))
        privs: list[str] = list(check[2])
        if options.get("any"):
            if any(token.has(path, p) for p in privs):
                return True
            if noerr:
                return False
            raise PermissionDenied(f"{path}, {'|'.join(privs)}")
        for p in privs:
            if not token.has(path, p):
                if noerr:
                    return False
                raise PermissionDenied(f"{path}, {p}")
        return True
    if kind == "userid-param":  # 'self': a token is never the user it belongs to
        if noerr:
            return False
        raise PermissionDenied()
    if kind == "userid-group":
        return _userid_group(check, token, params, access, noerr)
    return True  # perm-modify: only on writes pvesim does not serve


def _userid_group(check: list[Any], token: Any, params: dict[str, Any], access: Any, noerr: bool) -> bool:
    """Any of the privileges on /access/groups, or on a group the user ``userid`` belongs to."""
    privs: list[str] = list(check[1])
    userid = str(params.get("userid", ""))
    user = access.users.get(userid) if access is not None else None
    if user is None:  # check_user_exist
        if noerr:
            return False
        raise PermissionDenied()
    if any(token.has("/access/groups", p) for p in privs):
        return True
    if any(token.has(f"/access/groups/{g}", p) for g in user.groups for p in privs):
        return True
    if noerr:
        return False
    raise PermissionDenied()


def _normalize(path: str) -> str:
    """PVE::AccessControl::normalize_path: one slash between parts, none at the end."""
    return "/" + "/".join(p for p in path.split("/") if p)
