"""Reads of one object of the access control (pve-access-control src/PVE/API2/User.pm, Group.pm, Role.pm,
Domains.pm, TFA.pm, AccessControl.pm) and of one resource pool (pve-manager PVE/API2/Pool.pm read_pool)."""

from __future__ import annotations

from typing import Any

from pvesim.access import User
from pvesim.api import render
from pvesim.api.registry import ApiError, Call, route


def _user(call: Call) -> User:
    """AccessControl.pm check_user_exist: "no such user ('<userid>')"."""
    userid = str(call.params["userid"])
    user = call.cluster.access.users.get(userid)
    if user is None:
        raise ApiError(500, f"no such user ('{userid}')")
    return user


def _tokens(user: User) -> dict[str, dict[str, Any]]:
    """user.cfg's token lines: expire and privsep always, a comment when set."""
    out: dict[str, dict[str, Any]] = {}
    for tid, info in sorted(user.tokens.items()):
        entry: dict[str, Any] = {"expire": int(str(info.get("expire", 0))), "privsep": int(str(info.get("privsep", 1)))}
        if info.get("comment"):
            entry["comment"] = info["comment"]
        out[tid] = entry
    return out


@route("GET", "/access/users/{userid}")
def read_user(call: Call) -> dict[str, Any]:
    """User.pm read_user ($extract_user_data with full): enable and expire always, the names, e-mail and comment
    when set, the sorted groups and the tokens."""
    u = _user(call)
    res: dict[str, Any] = {"enable": int(u.enable), "expire": u.expire}
    for name in ("firstname", "lastname", "email", "comment"):
        if getattr(u, name):
            res[name] = getattr(u, name)
    res["groups"] = sorted(u.groups)
    res["tokens"] = _tokens(u)
    return res


@route("GET", "/access/users/{userid}/tfa")
def read_user_tfa_type(call: Call) -> dict[str, Any]:
    """User.pm read_user_tfa_type: the realm's TFA type when it enforces one; with ``multiple`` the types of
    the user's entries (the new tfa.cfg keeps no single type per user)."""
    userid = str(call.params["userid"])
    realm = userid.rsplit("@", 1)[-1]
    domain = next((d for d in call.cluster.access.domains if d.get("realm") == realm), None)
    if domain is None:
        raise ApiError(500, f"auth domain '{realm}' does not exist")
    res: dict[str, Any] = {}
    tfa = str(domain.get("tfa") or "")
    kind = next((p.split("=", 1)[1] for p in tfa.split(",") if p.startswith("type=")), None)
    if kind:
        res["realm"] = kind
    if call.flag("multiple"):
        user = call.cluster.access.users.get(userid)
        res["user"] = sorted({str(e["type"]) for e in (user.tfa if user else [])})
    return res


@route("GET", "/access/users/{userid}/token")
def token_index(call: Call) -> list[dict[str, Any]]:
    """User.pm token_index: every token of the user with its id."""
    return [{"tokenid": tid, **info} for tid, info in _tokens(_user(call)).items()]


@route("GET", "/access/users/{userid}/token/{tokenid}")
def read_token(call: Call) -> dict[str, Any]:
    """User.pm read_token (check_token_exist): "no such token '<id>' for user '<userid>'"."""
    u = _user(call)
    tid = str(call.params["tokenid"])
    token = _tokens(u).get(tid)
    if token is None:
        raise ApiError(500, f"no such token '{tid}' for user '{u.userid}'")
    return token


@route("GET", "/access/groups/{groupid}")
def read_group(call: Call) -> dict[str, Any]:
    """Group.pm read_group: the members and the comment."""
    db = call.cluster.access
    gid = str(call.params["groupid"])
    if gid not in db.groups:
        raise ApiError(500, f"group '{gid}' does not exist")
    res: dict[str, Any] = {"members": db.group_members(gid)}
    if db.groups[gid]:
        res["comment"] = db.groups[gid]
    return res


@route("GET", "/access/roles/{roleid}")
def read_role(call: Call) -> dict[str, int]:
    """Role.pm read_role: user.cfg's privileges of the role as a hash of 1s."""
    role = str(call.params["roleid"])
    privs = call.cluster.access.roles.get(role)
    if privs is None:
        raise ApiError(500, f"role '{role}' does not exist")
    return dict.fromkeys(sorted(privs), 1)


@route("GET", "/access/domains/{realm}")
def read_domain(call: Call) -> dict[str, Any]:
    """Domains.pm read: the realm's section (type and its options) with the file's digest."""
    realm = str(call.params["realm"])
    domains = call.cluster.access.domains
    data = next((d for d in domains if d.get("realm") == realm), None)
    if data is None:
        raise ApiError(500, f"domain '{realm}' does not exist")
    res = {k: v for k, v in data.items() if k != "realm"}
    if res.get("default"):
        res["default"] = 1
    res["digest"] = render.digest_of([sorted(d.items()) for d in domains])
    return res


def _tfa_entries(call: Call) -> list[dict[str, Any]]:
    userid = str(call.params["userid"])
    user = call.cluster.access.users.get(userid)
    if user is None:
        raise ApiError(500, f"no such user ('{userid}')")
    return [{**e, **({"enable": 1} if "enable" not in e else {})} for e in user.tfa]


@route("GET", "/access/tfa/{userid}")
def list_user_tfa(call: Call) -> list[dict[str, Any]]:
    """TFA.pm list_user_tfa: the user's entries (id, type, description, created, enable)."""
    return _tfa_entries(call)


@route("GET", "/access/tfa/{userid}/{id}")
def get_tfa_entry(call: Call) -> dict[str, Any]:
    """TFA.pm get_tfa_entry: 404 "No such tfa entry '<id>'" (a ``raise`` with no newline)."""
    tid = str(call.params["id"])
    entry = next((e for e in _tfa_entries(call) if e["id"] == tid), None)
    if entry is None:
        raise ApiError(404, f"No such tfa entry '{tid}'", newline=False)
    return entry


@route("GET", "/access/ticket")
def get_ticket(_call: Call) -> None:
    """AccessControl.pm get_ticket: 'Dummy. Useful for formatters which want to provide a login page.'"""
    return None


@route("GET", "/pools/{poolid}")
def read_pool(call: Call) -> dict[str, Any]:
    """Pool.pm read_pool (its index with ``poolid``): the guests' resource rows (extract_vm_stats) and the
    pool's storages, filtered by ``type``; the comment when set."""
    c = call.cluster
    pool = str(call.params["poolid"])
    config = c.access.pools.get(pool)
    guests = sorted((g for g in c.guests.values() if g.pool == pool), key=lambda g: str(g.vmid))
    if config is None and not guests:
        raise ApiError(500, f"pool '{pool}' does not exist")
    kind = call.params.get("type")
    members: list[dict[str, Any]] = []
    for g in guests:
        if kind in (None, g.type):
            members.append({**render.guest_resource(c, g), "pool": pool})
    listed = (config or {}).get("storage") or []
    storages = [str(s) for s in listed] if isinstance(listed, list) else []
    if kind in (None, "storage"):
        for sid in sorted(storages):
            s = c.storages.get(sid)
            if s is None:
                continue
            node = next((n for n in c.nodes if s.available_on(n)), next(iter(c.nodes)))
            members.append(render.storage_resource(c, s, node))
    res: dict[str, Any] = {"members": members}
    if (config or {}).get("comment"):
        res["comment"] = config["comment"] if config else ""
    return res
