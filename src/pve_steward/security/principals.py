"""The principals file: named static tokens, OIDC users and OIDC group rules, each with its limits.

Every entry may carry all the limits a caller can have (``authority.Grant``): ``tier`` (a ceiling
under the server's ``--tier``), ``clusters`` (names of ``[clusters.NAME]`` tables; absent: all) and
``allow_actions``/``deny_actions`` (operation globs; deny wins). An OIDC caller is matched by its
``[[users]]`` entry when it has one (a person's own entry decides alone), else by the ``[[groups]]``
rules of its groups (each rule a grant of its own: the caller may do what one of them allows), else
it gets ``default_tier`` on every cluster. At start, every cluster an entry names must be configured
and every glob must match an operation: a typo would otherwise refuse or allow what was not meant.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pve_steward.security.authority import Grant, Principal
from pve_steward.security.files import refuse_exposed
from pve_steward.security.tiers import Tier

GLOBS = Field(None, description="operation names or globs (fnmatch); absent: no limit")


class Limits(BaseModel):
    """What one entry allows: the limits every kind of entry shares."""

    model_config = ConfigDict(extra="forbid")
    tier: Tier = Tier.READ_ONLY
    clusters: list[str] | None = None
    allow_actions: list[str] | None = GLOBS
    deny_actions: list[str] = Field(default_factory=list)

    def grant(self, label: str) -> Grant:
        return Grant(
            label=label,
            tier=self.tier,
            clusters=None if self.clusters is None else tuple(self.clusters),
            allow=None if self.allow_actions is None else tuple(self.allow_actions),
            deny=tuple(self.deny_actions),
        )


class StaticToken(Limits):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the token (printf %s TOKEN | sha256sum)")


class UserRule(Limits):
    subject: str = Field(min_length=1, max_length=255, description="the value of the principal claim (default sub)")


class GroupRule(Limits):
    group: str = Field(min_length=1)


class PrincipalsFile(BaseModel):
    """The principals file (TOML): static tokens, OIDC users and group rules, the tier of an OIDC user in none."""

    model_config = ConfigDict(extra="forbid")
    default_tier: Tier = Tier.READ_ONLY
    tokens: list[StaticToken] = Field(default_factory=list)
    users: list[UserRule] = Field(default_factory=list)
    groups: list[GroupRule] = Field(default_factory=list)

    def static(self, entry: StaticToken) -> Principal:
        return Principal(id=f"static:{entry.name}", name=entry.name, grants=(entry.grant(f"token {entry.name}"),))

    def oidc(self, issuer: str, subject: str, groups: list[str]) -> Principal:
        """An OIDC caller: its user entry, else its groups' rules, else the default tier everywhere."""
        user = next((u for u in self.users if u.subject == subject), None)
        if user is not None:
            grants: tuple[Grant, ...] = (user.grant(f"user {subject}"),)
        else:
            grants = tuple(r.grant(f"group {r.group}") for r in self.groups if r.group in groups)
        grants = grants or (Grant(label="default_tier", tier=self.default_tier),)
        return Principal(id=f"oidc:{issuer}#{subject}", name=subject, grants=grants)

    def check(self, clusters: Collection[str], operations: Collection[str], where: str = "principals_file") -> None:
        """Every cluster named is configured and every glob matches an operation (else ValueError naming the entry)."""
        named = "" if clusters else " (this server has no [clusters.NAME] tables, so no cluster has a name)"
        for kind, entries in (("tokens", self.tokens), ("users", self.users), ("groups", self.groups)):
            for i, entry in enumerate(entries):
                at = f"{where}: {kind}.{i}"
                unknown = sorted(set(entry.clusters or []) - set(clusters))
                if unknown:
                    known = ", ".join(clusters) or "none"
                    raise ValueError(f"{at}.clusters: no cluster {', '.join(unknown)}; clusters are: {known}{named}")
                for field in ("allow_actions", "deny_actions"):
                    for glob in getattr(entry, field) or []:
                        if not any(fnmatch.fnmatchcase(op, glob) for op in operations):
                            raise ValueError(f"{at}.{field}: '{glob}' matches no operation")


def load_principals(path: Path | None) -> PrincipalsFile:
    """Read and check the principals file; every problem names the entry and the field."""
    if path is None:
        return PrincipalsFile()
    refuse_exposed(path, "principals_file")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        parsed = PrincipalsFile.model_validate(raw)
    except OSError as exc:
        raise ValueError(f"cannot read principals_file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"principals_file {path} is not valid TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"principals_file {path}: {where}: {first['msg']}") from None
    for what, names in (
        ("static tokens share a name", [t.name for t in parsed.tokens]),
        ("static tokens share a sha256", [t.sha256 for t in parsed.tokens]),
        ("user entries share a subject", [u.subject for u in parsed.users]),
    ):
        if len(names) != len(set(names)):
            raise ValueError(f"principals_file {path}: two {what}")
    return parsed
