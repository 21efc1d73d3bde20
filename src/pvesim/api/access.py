"""``GET /access/permissions``: the calling token's effective privileges per ACL path."""

from __future__ import annotations

from typing import Any

from pvesim.api.registry import ApiError, Call, route


@route("GET", "/access/permissions")
def permissions(call: Call) -> dict[str, dict[str, int]]:
    token = call.token
    other = "userid" in call.params and call.params["userid"] not in (token.full_id, token.user.userid)
    if other and not call.can("/access", "Sys.Audit"):
        raise ApiError(403, "Permission check failed (/access, Sys.Audit)")
    paths = [call.params["path"]] if "path" in call.params else token.acl_paths()
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        privs = token.privileges(path)
        if privs:
            out[path] = dict.fromkeys(sorted(privs), 1)
    return out
