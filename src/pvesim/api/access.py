"""``GET /access/permissions``: the calling token's effective privileges per ACL path."""

from __future__ import annotations

from typing import Any

from pvesim.access import DEFAULT_PERMISSION_PATHS, AclRow, listed, token_acl
from pvesim.api.registry import ApiError, Call, b, route


@route("GET", "/access/permissions")
def permissions(call: Call) -> dict[str, dict[str, int]]:
    token = call.token
    other = "userid" in call.params and call.params["userid"] not in (token.full_id, token.user.userid)
    if other and not call.can("/access", "Sys.Audit"):
        raise ApiError(403, "Permission check failed (/access, Sys.Audit)")
    if "path" in call.params:  # one path: answered even without any privilege (API2/AccessControl.pm permissions)
        path = str(call.params["path"])
        return {path: dict.fromkeys(sorted(token.privileges(path)), 1)}
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(_effective_paths(call)):
        privs = token.privileges(path)
        if privs:  # RPCEnvironment.pm get_effective_permissions: 'filter paths where user has NO permissions'
            out[path] = dict.fromkeys(sorted(privs), 1)
    return out


def _acl_rows(call: Call) -> list[AclRow]:
    return token_acl(list(call.cluster.tokens.values())) + call.cluster.access.acl


def _effective_paths(call: Call) -> set[str]:
    """RPCEnvironment.pm get_effective_permissions: the default paths, every path of the ACL tree (anyone's
    entries) and every path a pool definition references (its guests and storages)."""
    c = call.cluster
    paths = set(DEFAULT_PERMISSION_PATHS) | {a.path for a in _acl_rows(call)}
    paths |= {f"/vms/{g.vmid}" for g in c.guests.values() if g.pool}
    paths |= {f"/storage/{sid}" for pool in c.access.pools.values() for sid in listed(pool.get("storage"))}
    return paths


_USER_PRIVS = ("User.Modify", "Sys.Audit")


def _can_any(call: Call, path: str, privs: tuple[str, ...]) -> bool:
    return any(call.can(path, p) for p in privs)


def _visible_users(call: Call) -> set[str]:
    """Users the caller may list: all with User.Modify or Sys.Audit on /access/groups, else the members of
    the groups where it has them (pve-access-control API2/User.pm ``index``, RPCEnvironment ``filter_groups``)."""
    db = call.cluster.access
    if _can_any(call, "/access/groups", _USER_PRIVS):
        return set(db.users)
    allowed = {g for g in db.groups if _can_any(call, f"/access/groups/{g}", _USER_PRIVS)}
    # "always includes the current user": for a token that is the token id, which is no user of the list
    # (AccessControl.pm verify_token returns the token id as the request's user)
    return {u.userid for u in db.users.values() if allowed & set(u.groups)} | {call.user}


@route("GET", "/access/users")
def users(call: Call) -> list[dict[str, Any]]:
    db = call.cluster.access
    visible = _visible_users(call)
    realm_types = {str(d["realm"]): str(d["type"]) for d in db.domains}
    out = []
    for userid in sorted(visible & set(db.users)):
        u = db.users[userid]
        if "enabled" in call.params and call.flag("enabled") != u.enable:
            continue
        row: dict[str, Any] = {"userid": userid, "enable": b(u.enable), "expire": u.expire}
        for name in ("email", "comment", "firstname", "lastname"):
            if getattr(u, name):
                row[name] = getattr(u, name)
        if call.flag("full"):  # $extract_user_data with $full: groups always, "" for none (index joins the list)
            row["groups"] = ",".join(u.groups)
        if call.flag("full") and u.tokens:  # $extract_user_data with $full
            row["tokens"] = [
                {"tokenid": tid, **{k: v for k, v in info.items() if v != ""}} for tid, info in sorted(u.tokens.items())
            ]
        realm = userid.rsplit("@", 1)[-1]
        if realm in realm_types:
            row["realm-type"] = realm_types[realm]
        out.append(row)
    return out


@route("GET", "/access/tfa")
def tfa(call: Call) -> list[dict[str, Any]]:
    """API2/TFA.pm ``list_tfa``: every user with TFA entries, filtered as the user list is."""
    db = call.cluster.access
    visible = _visible_users(call)
    return [
        {"userid": u.userid, "entries": [dict(e) for e in u.tfa]}
        for u in sorted(db.users.values(), key=lambda u: u.userid)
        if u.tfa and u.userid in visible
    ]


@route("GET", "/access/acl")
def acl(call: Call) -> list[dict[str, Any]]:
    """API2/ACL.pm ``read_acl``: all entries with Sys.Audit on /access, else those on paths the caller may
    change permissions of (``check_perm_modify``: Permissions.Modify)."""
    audit = call.can("/access", "Sys.Audit")
    return [
        {"path": a.path, "type": a.type, "ugid": a.ugid, "roleid": a.roleid, "propagate": b(a.propagate)}
        for a in _acl_rows(call)
        if audit or _perm_modify(call, a.path)
    ]


# RPCEnvironment.pm check_perm_modify: besides Permissions.Modify, the allocate privilege of the object
_PERM_MODIFY_ALSO = (("/storage/", "Datastore.Allocate"), ("/vms/", "VM.Allocate"), ("/pool/", "Pool.Allocate"))


def _perm_modify(call: Call, path: str) -> bool:
    also = tuple(priv for prefix, priv in _PERM_MODIFY_ALSO if path.startswith(prefix) and len(path) > len(prefix))
    return _can_any(call, path, ("Permissions.Modify", *also))


@route("GET", "/access/roles")
def roles(call: Call) -> list[dict[str, Any]]:
    db = call.cluster.access
    return [
        {"roleid": name, "privs": ",".join(sorted(privs)), "special": b(name in db.builtin)}
        for name, privs in sorted(db.roles.items())
    ]


@route("GET", "/access/groups")
def groups(call: Call) -> list[dict[str, Any]]:
    """API2/Group.pm ``index``: groups where the caller has User.Modify, Sys.Audit or Group.Allocate."""
    db = call.cluster.access
    out = []
    for gid, comment in sorted(db.groups.items()):
        if not _can_any(call, f"/access/groups/{gid}", (*_USER_PRIVS, "Group.Allocate")):
            continue
        # a group line always has a member hash, so ``users`` is there, "" when empty
        row: dict[str, Any] = {"groupid": gid, "users": ",".join(db.group_members(gid))}
        if comment:
            row["comment"] = comment
        out.append(row)
    return out


@route("GET", "/access/domains")
def domains(call: Call) -> list[dict[str, Any]]:
    """API2/Domains.pm ``index``: realm, type, comment and default when set, and of the realm's ``tfa``
    property string only its type (``oath``/``yubico``, parse_tfa_config)."""
    out = []
    for d in call.cluster.access.domains:
        row: dict[str, Any] = {"realm": d.get("realm"), "type": d.get("type")}
        if d.get("comment"):
            row["comment"] = d["comment"]
        if d.get("default"):
            row["default"] = 1
        tfa_type = _tfa_type(d.get("tfa"))
        if tfa_type:
            row["tfa"] = tfa_type
        out.append(row)
    return out


def _tfa_type(value: object) -> str | None:
    """``type=oath,step=30`` -> ``oath`` (Auth/Plugin.pm $tfa_format: ``type`` has no default key)."""
    if not isinstance(value, str):
        return None
    for part in value.split(","):
        key, _, val = part.partition("=")
        if key.strip() == "type" and val.strip():
            return val.strip()
    return None


def pool_names(c: Any) -> list[str]:
    """Every pool of user.cfg: the scenario's, the guests', and a nested pool's parents (AccessControl.pm
    parse_user_config creates them)."""
    names = set(c.access.pools) | {g.pool for g in c.guests.values() if g.pool}
    names |= {"/".join(n.split("/")[:i]) for n in list(names) for i in range(1, n.count("/") + 1)}
    return sorted(names)


@route("GET", "/pools")
def pools(call: Call) -> list[dict[str, Any]]:
    """API2/Pool.pm ``index``: the pools with Pool.Audit on /pool/<id>; with ``poolid`` that one pool, whatever the
    caller holds (the index calls ``check(..., 1)`` there and ignores its answer) (members only with ``poolid``)."""
    c = call.cluster
    names = pool_names(c)
    if "poolid" in call.params and call.params["poolid"] not in names:
        raise ApiError(500, f"pool '{call.params['poolid']}' does not exist")
    out = []
    for pool in names:
        if "poolid" in call.params and call.params["poolid"] != pool:
            continue
        if "poolid" not in call.params and not call.can(f"/pool/{pool}", "Pool.Audit"):
            continue
        row: dict[str, Any] = {"poolid": pool}
        comment = c.access.pools.get(pool, {}).get("comment")
        if comment:
            row["comment"] = comment
        out.append(row)
    return out
