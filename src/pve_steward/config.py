"""Configuration: defaults < TOML file < environment (``PVE_STEWARD_*``) < command-line flags.

One pydantic settings object; the CLI's flags are generated from its fields, so ``--help``
documents every option and cannot drift from what is read. Secrets are ``SecretStr`` and are
never printed. An empty ``PVE_STEWARD_*`` variable counts as unset (a client config or a bundle
leaves optional ones blank); one that names no setting is refused with the closest real name, as
an unknown key of the file is (design record 261206-64).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from pve_steward.analysis.suppressionrule import Suppression, parse_suppressions
from pve_steward.pveio.budget import check_budget_store
from pve_steward.security.files import refuse_exposed
from pve_steward.security.syslog import SyslogTarget
from pve_steward.security.tiers import Tier

ENV_PREFIX = "PVE_STEWARD_"
CONFIG_VARIABLE = ENV_PREFIX + "CONFIG"  # the TOML file (--config); not a setting of its own
MIN_BEARER_LENGTH = 32
# the TOML file's values load_settings has read (and checked), for the settings' file source: a subclass of
# Settings per load (to name its file) built a 69-field model class on every start, 13 ms of a start, and the
# source then read the file a second time (issue 43)
_FILE_VALUES: ContextVar[dict[str, Any] | None] = ContextVar("settings_file_values", default=None)
TOKEN_ID_RE = re.compile(r"^[^\s:/@!]+@[A-Za-z][A-Za-z0-9.\-_]+![A-Za-z][A-Za-z0-9.\-_]+$")


CLUSTER_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# The connection settings a [clusters.NAME] table replaces; giving both is an error.
CONNECTION = ("url", "token_id", "token_secret", "token_secret_file", "fingerprint", "ca_file", "insecure")


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "pve-steward"


def check_token_id(v: str | None) -> str | None:
    if v is not None and not TOKEN_ID_RE.fullmatch(v):
        raise ValueError("token_id must look like user@realm!tokenname (for example ops@pve!mcp)")
    return v


def check_fingerprint(v: str | None) -> str | None:
    if v is None:
        return None
    hexed = v.replace(":", "").strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", hexed):
        raise ValueError("fingerprint must be a SHA-256 digest: 64 hex digits, colons allowed")
    return hexed


def check_url(v: str | None, product: str = "PVE") -> str | None:
    if v is None:
        return None
    v = v.strip().rstrip("/")
    if v.startswith("http://"):
        raise ValueError(f"the {product} API is only served over HTTPS; use https:// or a bare host")
    v = v.removeprefix("https://").removesuffix("/api2/json")
    if not re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-]+)(:\d{1,5})?", v):
        raise ValueError(f"'{v}' is not a host or host:port")
    return v


class ClusterConfig(BaseModel):
    """One ``[clusters.NAME]`` table: how to reach that cluster and the highest tier allowed on it."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(description="PVE API address: host, host:port or https://host:port")
    token_id: str = Field(description="API token id, user@realm!tokenname")
    token_secret_file: Path | None = Field(None, description="file holding the API token secret")
    token_secret: SecretStr | None = Field(None, description="the API token secret itself (prefer the file)")
    fingerprint: str | None = Field(None, description="pin the certificate by SHA-256 fingerprint")
    ca_file: Path | None = Field(None, description="CA bundle (PEM) that signed the certificate")
    insecure: bool = Field(False, description="disable TLS verification (avoid)")
    max_tier: Tier = Field(Tier.ADMIN, description="ceiling: writes above it are refused on this cluster")
    pbs: dict[str, Any] | None = Field(
        None, description="this cluster's PBS connection ([clusters.NAME.pbs]); keys are the pbs_* settings"
    )

    @field_validator("url", "token_id", "fingerprint")
    @classmethod
    def _connection(cls, v: str | None, info: ValidationInfo) -> str | None:
        check = {"url": check_url, "token_id": check_token_id, "fingerprint": check_fingerprint}[str(info.field_name)]
        return check(v)

    @model_validator(mode="after")
    def _consistent(self) -> ClusterConfig:
        if (self.token_secret is None) == (self.token_secret_file is None):
            raise ValueError("give exactly one of token_secret_file or token_secret")
        if self.insecure and self.fingerprint:
            raise ValueError("insecure and fingerprint contradict each other; a pinned fingerprint is verified")
        if self.token_secret_file is not None:
            if not self.token_secret_file.is_file():
                raise ValueError(f"token_secret_file {self.token_secret_file} does not exist or is not a file")
            refuse_exposed(self.token_secret_file, "token_secret_file")
        return self


class Settings(BaseSettings):
    """Every option of pve-steward (flag ``--some-option`` = env ``PVE_STEWARD_SOME_OPTION`` = TOML key)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, env_ignore_empty=True
    )

    # --- connection to Proxmox VE
    url: str | None = Field(None, description="PVE API address: host, host:port or https://host:port")
    token_id: str | None = Field(None, description="API token id, user@realm!tokenname")
    token_secret: SecretStr | None = Field(None, description="API token secret (prefer --token-secret-file)")
    token_secret_file: Path | None = Field(None, description="file holding the API token secret")
    verify_tls: bool = Field(True, description="verify the PVE certificate against the system CAs or --ca-file")
    ca_file: Path | None = Field(None, description="CA bundle (PEM) that signed the PVE certificate")
    fingerprint: str | None = Field(
        None,
        description="pin the PVE certificate by SHA-256 fingerprint "
        "(pvenode cert info); works with self-signed certificates",
    )
    insecure: bool = Field(False, description="disable TLS verification entirely (logged as a warning; avoid)")
    timeout: float = Field(10.0, gt=0, le=600, description="read timeout per API request, seconds")
    connect_timeout: float = Field(5.0, gt=0, le=120, description="connect timeout per API request, seconds")
    concurrency: int = Field(
        16, ge=1, le=64, description="API requests in flight at once (one pool, shared by concurrent tool calls)"
    )
    retries: int = Field(2, ge=0, le=5, description="retries of failed reads (never writes), with backoff")
    request_budget: float | None = Field(
        None,
        gt=0,
        le=10000,
        description="API requests per second for this cluster, shared by every replica through Redis (budget.py)",
    )
    request_budget_burst: int = Field(10, ge=1, le=1000, description="requests the budget lets through at once")
    otel_endpoint: str | None = Field(
        None,
        description="export traces (a span per tool call and per PVE request) to this OTLP/HTTP collector, "
        "e.g. http://otel-collector:4318; needs pve-steward[otel]",
    )
    otel_service_name: str = Field("pve-steward", description="service.name of the exported traces")
    request_budget_store: str | None = Field(
        None, description="Redis URL holding the shared budget (default: token_store when that is a Redis URL)"
    )

    # --- connection to Proxmox Backup Server (optional; design record 261203-20)
    pbs_url: str | None = Field(None, description="PBS API address: host, host:port (default port 8007) or https://...")
    pbs_token_id: str | None = Field(
        None, description="PBS API token id, user@realm!tokenname (needs Datastore.Audit on /datastore)"
    )
    pbs_token_secret: SecretStr | None = Field(
        None, description="PBS API token secret (prefer --pbs-token-secret-file)"
    )
    pbs_token_secret_file: Path | None = Field(None, description="file holding the PBS API token secret")
    pbs_ca_file: Path | None = Field(None, description="CA bundle (PEM) that signed the PBS certificate")
    pbs_fingerprint: str | None = Field(
        None, description="pin the PBS certificate by SHA-256 fingerprint (proxmox-backup-manager cert info)"
    )
    clusters: dict[str, ClusterConfig] = Field(
        default_factory=dict,
        description="several clusters, one [clusters.NAME] table each (config file only): url, token_id, "
        "token_secret_file, fingerprint or ca_file, max_tier, [clusters.NAME.pbs]; replaces url and token_id",
    )

    # --- MCP transport
    transport: Literal["stdio", "http"] = Field("stdio", description="MCP transport")
    http_host: str = Field("127.0.0.1", description="HTTP bind address (non-loopback requires --http-bearer-token)")
    http_port: int = Field(8765, ge=0, le=65535, description="HTTP port")
    http_bearer_token: SecretStr | None = Field(None, description="bearer token HTTP clients must send")
    public_url: str | None = Field(
        None,
        description="the URL clients reach this server at (https://steward.example.lan); the OAuth resource "
        "identifier with identity on (default http://<http_host>:<http_port>)",
    )
    oidc_issuer: str | None = Field(None, description="OIDC issuer whose JWT access tokens identify callers (HTTP)")
    oidc_audience: str | None = Field(None, description="the audience (aud) the issuer puts in tokens for this server")
    oidc_jwks_url: str | None = Field(None, description="the issuer's JWKS URL (default: from its discovery document)")
    oidc_principal_claim: str = Field("sub", description="the claim that names the caller (sub, email, ...)")
    oidc_groups_claim: str = Field("groups", description="the claim listing the caller's groups")
    oidc_jwks_refresh: float = Field(
        300.0,
        ge=1,
        le=86_400,
        description="seconds the issuer's signing keys (JWKS) are trusted after they were read: a key the issuer "
        "withdrew stops working within this time; while the JWKS cannot be read past it, tokens are refused",
    )
    principals_file: Path | None = Field(
        None,
        description="TOML: named static tokens, OIDC users and OIDC groups, each with its limits: a tier ceiling, "
        "the clusters it may use, allowed and denied actions (docs/deploy.md)",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="extra Host headers accepted over HTTP (DNS-rebinding protection), e.g. mcp.lan:*",
    )
    max_request_bytes: int = Field(1_048_576, ge=1024, description="largest accepted HTTP request body, bytes")
    http_header_timeout: float = Field(
        10.0, gt=0, le=300, description="seconds a client has to send a request's headers, else it is disconnected"
    )
    http_body_timeout: float = Field(
        30.0, gt=0, le=600, description="seconds a client has to send a request's body, else it is disconnected"
    )
    http_max_connections_per_client: int = Field(
        256, ge=1, le=65535, description="open HTTP connections allowed from one client address; more are closed"
    )
    http_max_sessions: int = Field(512, ge=1, le=100_000, description="MCP sessions open at once over HTTP")
    http_session_idle_timeout: float = Field(
        1800.0, gt=0, le=86_400, description="seconds after which an idle MCP session over HTTP is closed"
    )

    read_cache_ttl: float = Field(
        3.0,
        ge=0,
        le=60,
        description="seconds a read answer is reused by read-only tools (0: only share identical in-flight reads); "
        "writes always read fresh",
    )

    heavy_calls: int = Field(
        4, ge=1, le=64, description="heavy diagnostics and plans running at once; more callers wait for a slot"
    )
    busy_wait: float = Field(
        15.0, ge=0, le=300, description="seconds a heavy call waits for a slot before it answers busy (retry in N s)"
    )
    diagnostics_process: bool = Field(
        False,
        description="run heavy diagnostics and plans in a process of their own (HTTP only): for a shared server "
        "where several users run heavy checks at once, cheap calls' p90 then stays about 1.6x lower, for a second "
        "process of about 80 MiB (design record 261206-60)",
    )
    diagnostics_priority: Literal["idle", "low"] = Field(
        "idle",
        description="the diagnostics process's CPU priority: idle (Linux SCHED_IDLE: only CPU time nothing else "
        "on the host wants, so a cheap call never waits for it; on a host busy with other work heavy calls then "
        "crawl) or low (nice 10: a small share beside other work)",
    )

    # --- what is registered
    tier: Tier = Field(Tier.READ_ONLY, description="highest write tier to register: read_only, operator, admin")
    read_only: bool = Field(False, description="register no write tools at all (overrides --tier)")
    granular_tools: bool = Field(False, description="one MCP tool per operation instead of domain meta-tools")
    toolsets: Annotated[list[str] | None, NoDecode] = Field(None, description="only these toolsets (comma-separated)")
    disable_toolsets: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="toolsets to leave out (comma-separated)"
    )
    tools_file: Path | None = Field(None, description="tool definitions file overriding the packaged tools.yaml")
    allow_actions: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="register only operations matching one of these globs (comma-separated, e.g. 'list_*,get_*'); "
        "narrows tiers and toolsets, never widens them",
    )
    deny_actions: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="never register operations matching these globs (comma-separated, e.g. guest_stop); wins "
        "over --allow-actions",
    )
    disable_version_check: bool = Field(
        False, description="skip the PVE version check (without it, tools refuse a release outside the supported range)"
    )

    # --- safety
    audit_log: Path = Field(
        default_factory=lambda: default_state_dir() / "audit.jsonl",
        description="append-only, hash-chained audit log (JSON lines)",
    )
    audit_reads: bool = Field(True, description="also audit read-only tool calls")
    confirm_ttl: int = Field(300, ge=10, le=3600, description="lifetime of a write confirmation token, seconds")
    confirm_key_file: Path | None = Field(
        None, description="HMAC key for confirmation tokens, shared by HTTP replicas (default: random per process)"
    )
    token_store: str | None = Field(
        None,
        description="where used confirmation tokens are kept so each confirms one execution: default a SQLite "
        "file in the state dir (shared by restarts and processes on this host); a path; redis://host:port/db for "
        "replicas on several hosts; memory (this process only). Writes are refused while it is unreachable",
    )
    token_store_timeout: float = Field(
        3.0,
        gt=0,
        le=60,
        description="seconds a used-token store call may take; a store that does not answer in time refuses the "
        "write (fail closed) and holds up nothing else",
    )
    replicas: int = Field(
        1,
        ge=1,
        le=1000,
        description="how many servers share this one's confirm_key_file; above 1 the start refuses a token store "
        "they cannot share (sqlite, memory) and a Redis that loses used tokens on a restart (no appendonly)",
    )
    audit_syslog: str | None = Field(
        None,
        description="also send every audit record to this syslog receiver: tcp://host:port or tls://host:port "
        "(RFC 5424, octet-counted); records it cannot take wait in a queue file beside the audit log",
    )
    audit_syslog_ca_file: Path | None = Field(
        None, description="CA bundle (PEM) that signed the syslog receiver's certificate (tls://; default system CAs)"
    )
    audit_required: bool = Field(
        False,
        description="refuse a write before it starts while audit records cannot be delivered to --audit-syslog",
    )

    # --- diagnostics
    thresholds: Annotated[dict[str, float], NoDecode] = Field(
        default_factory=dict, description="override diagnostic thresholds, e.g. storage_warning_pct=75"
    )
    suppress: list[Suppression] = Field(
        default_factory=list,
        description="silence findings: [[suppress]] tables in the config file with code, reason and optionally one "
        "of subject, node, vmid, storage, and expires (as a flag or environment variable: the same as a JSON list)",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=_FILE_VALUES.get() or {})

    @field_validator("token_id", "pbs_token_id")
    @classmethod
    def _token_id(cls, v: str | None) -> str | None:
        return check_token_id(v)

    @field_validator("http_bearer_token")
    @classmethod
    def _bearer(cls, v: SecretStr | None) -> SecretStr | None:
        """At least MIN_BEARER_LENGTH characters, none of them blank: 40 spaces are 40 characters and no secret,
        and a space or control character cannot travel in an Authorization header anyway (RFC 6750 b64token)."""
        token = v.get_secret_value() if v is not None else ""
        if v is not None and any(c.isspace() or not c.isprintable() for c in token):
            raise ValueError(
                "http_bearer_token must not contain spaces, tabs, line breaks or control characters "
                "(for example the output of `openssl rand -hex 32`)"
            )
        if v is not None and len(token) < MIN_BEARER_LENGTH:
            raise ValueError(
                f"http_bearer_token must be at least {MIN_BEARER_LENGTH} characters (for example the output of "
                "`openssl rand -hex 32`); a short token can be guessed"
            )
        return v

    @field_validator("fingerprint", "pbs_fingerprint")
    @classmethod
    def _fingerprint(cls, v: str | None) -> str | None:
        return check_fingerprint(v)

    @field_validator("url", "pbs_url")
    @classmethod
    def _url(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_url(v, "PBS" if info.field_name == "pbs_url" else "PVE")

    @field_validator("audit_syslog")
    @classmethod
    def _syslog(cls, v: str | None) -> str | None:
        if v is not None:
            SyslogTarget.parse(v)
        return v

    @field_validator("toolsets", "disable_toolsets", "allowed_hosts", "allow_actions", "deny_actions", mode="before")
    @classmethod
    def _csv(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v.lstrip().startswith("["):  # the JSON form: environment values are not decoded for us (NoDecode)
                return _json(v, list, 'a JSON list (["a", "b"]) or values separated by commas (a,b)')
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @field_validator("thresholds", mode="before")
    @classmethod
    def _kv(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v.lstrip().startswith("{"):
                return _json(v, dict, "a JSON object or name=value pairs separated by commas")
            pairs = [p.split("=", 1) for p in v.split(",") if p.strip()]
            if any(len(p) != 2 for p in pairs):
                raise ValueError("thresholds take name=value pairs separated by commas")
            return {k.strip(): float(val) for k, val in pairs}
        return v

    @field_validator("suppress", mode="before")
    @classmethod
    def _suppress(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                raise ValueError(
                    'as a flag or environment variable, suppress is a JSON list, e.g. [{"code": "BACKUP_STALE", '
                    '"vmid": 101, "reason": "archived"}]'
                ) from None
        return parse_suppressions(v)

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.token_secret is not None and self.token_secret_file is not None:
            raise ValueError("give either token_secret or token_secret_file, not both")
        if self.insecure and self.fingerprint:
            raise ValueError("insecure and fingerprint contradict each other; a pinned fingerprint is verified")
        if self.read_only:
            self.tier = Tier.READ_ONLY
        if self.audit_required and self.audit_syslog is None:
            raise ValueError("audit_required needs audit_syslog (the receiver whose delivery is required)")
        if self.oidc_issuer is not None and not self.oidc_audience:
            raise ValueError("oidc_issuer needs oidc_audience (the aud claim tokens for this server carry)")
        if self.principals_file is not None:
            refuse_exposed(self.principals_file, "principals_file")
        check_budget_store(self.request_budget, self.request_budget_store or self.token_store)
        if self.token_secret_file is not None:
            refuse_exposed(self.token_secret_file, "token_secret_file")
        if self.confirm_key_file is not None:
            refuse_exposed(self.confirm_key_file, "confirm_key_file")
        self._consistent_pbs()
        if self.clusters:
            self._check_clusters()
        return self

    def _consistent_pbs(self) -> None:
        if self.pbs_token_secret is not None and self.pbs_token_secret_file is not None:
            raise ValueError("give either pbs_token_secret or pbs_token_secret_file, not both")
        if self.pbs_url is not None and self.pbs_token_id is None:
            raise ValueError("pbs_url needs pbs_token_id (and pbs_token_secret_file) to connect to PBS")
        if self.pbs_token_secret_file is not None:
            refuse_exposed(self.pbs_token_secret_file, "pbs_token_secret_file")

    def pbs_secret(self) -> str | None:
        """The PBS token secret, read from the file if one is configured."""
        if self.pbs_token_secret is not None:
            return self.pbs_token_secret.get_secret_value()
        if self.pbs_token_secret_file is not None:
            try:
                return self.pbs_token_secret_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ValueError(
                    f"cannot read pbs_token_secret_file {self.pbs_token_secret_file}: {exc.strerror}"
                ) from exc
        return None

    def _check_clusters(self) -> None:
        both = [name for name in CONNECTION if getattr(self, name) not in (None, False)]
        if both:
            raise ValueError(
                f"[clusters.*] tables replace {', '.join(both)}; give the connection either once per cluster "
                "or as the single-cluster settings, not both"
            )
        for name, cluster in self.clusters.items():  # TOML refuses a name given twice (read_toml says so)
            if not CLUSTER_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"cluster name '{name}' must be 1-32 lowercase letters, digits, '-' or '_', starting with a letter"
                )
            unknown = sorted(f"pbs_{k}" for k in cluster.pbs or {} if f"pbs_{k}" not in type(self).model_fields)
            if unknown:
                raise ValueError(f"clusters.{name}.pbs: unknown PBS setting(s) {', '.join(unknown)}")

    @property
    def offload_heavy(self) -> bool:
        """Whether heavy calls run in the diagnostics process (worker/): asked for, and serving many callers."""
        return self.diagnostics_process and self.transport == "http"

    def secret(self) -> str | None:
        """The token secret, read from the file if one is configured."""
        if self.token_secret is not None:
            return self.token_secret.get_secret_value()
        if self.token_secret_file is not None:
            try:
                return self.token_secret_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ValueError(f"cannot read token_secret_file {self.token_secret_file}: {exc.strerror}") from exc
        return None


# Settings that say the same thing two ways. The highest source that sets one of a group decides the
# whole group: a --token-secret flag replaces PVE_STEWARD_TOKEN_SECRET_FILE from the environment
# instead of contradicting it. Within one source, giving both is still an error.
EXCLUSIVE: tuple[frozenset[str], ...] = (
    frozenset({"token_secret", "token_secret_file"}),
    frozenset({"fingerprint", "insecure"}),
    frozenset({"pbs_token_secret", "pbs_token_secret_file"}),
)


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the setting and where it came from."""


def env_names(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Settings given in the environment: field name -> variable name (matched without regard to case).

    An empty variable is not given: pydantic-settings reads it as unset (``env_ignore_empty``), and so do we.
    """
    env = os.environ if environ is None else environ
    given = {key.upper(): key for key, value in env.items() if value != ""}
    return {
        name: given[ENV_PREFIX + name.upper()] for name in Settings.model_fields if ENV_PREFIX + name.upper() in given
    }


def env_variable(name: str) -> str:
    """The environment variable of a setting."""
    return ENV_PREFIX + name.upper()


def unknown_env(environ: Mapping[str, str] | None = None) -> str | None:
    """One sentence naming each ``PVE_STEWARD_*`` variable that is no setting, with the closest real one.

    A misspelt ``PVE_STEWARD_READ_ONY`` silently ignored would serve writes the user meant to remove, so
    it is refused, as an unknown key of the config file is. Empty variables count as unset and pass.
    """
    env = os.environ if environ is None else environ
    real = [env_variable(n) for n in Settings.model_fields] + [CONFIG_VARIABLE]
    unknown = sorted(
        key
        for key, value in env.items()
        if key.upper().startswith(ENV_PREFIX) and value != "" and key.upper() not in real
    )
    if not unknown:
        return None
    named = []
    for key in unknown:  # compared without the prefix every name shares, which would make anything look close
        close = difflib.get_close_matches(
            key.upper().removeprefix(ENV_PREFIX), [r[len(ENV_PREFIX) :] for r in real], n=1
        )
        named.append(f"{key} (did you mean {ENV_PREFIX}{close[0]}?)" if close else key)
    return (
        f"unknown environment variable{'s' if len(named) > 1 else ''} {', '.join(named)}: "
        f"{ENV_PREFIX}* variables are the settings' names in capitals (see pve-steward serve --help); "
        "correct the name or unset it"
    )


def read_toml(path: Path) -> dict[str, Any]:
    """The config file's settings; a syntax error or an unknown key names the file."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        twice = re.match(r"Cannot declare \('clusters', '([^']*)'\) twice \(at line (\d+)", str(exc))
        if twice:
            raise ConfigError(
                f"config file {path}: cluster '{twice.group(1)}' is defined twice (again at line {twice.group(2)}); "
                "each [clusters.NAME] table needs its own name"
            ) from None
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    unknown = sorted(set(data) - set(Settings.model_fields))
    if unknown:
        hints = [f"'{k}'" + _did_you_mean(k) for k in unknown]
        raise ConfigError(
            f"config file {path}: unknown setting {', '.join(hints)}; settings are the long flag names "
            "with underscores (see pve-steward serve --help)"
        )
    return data


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key.replace("-", "_"), list(Settings.model_fields), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _default(name: str) -> Any:
    field = Settings.model_fields[name]
    return field.get_default(call_default_factory=True)


def _source(name: str, flags: Collection[str], env: Mapping[str, str], path: Path | None) -> str:
    if name in flags:
        return "--" + name.replace("_", "-")
    if name in env:
        return f"env {env[name]}"
    return f"config file {path}" if path is not None else "default"


def describe_errors(exc: ValidationError, source: Callable[[str], str] | None = None) -> str:
    """One line for a failed validation: each setting, where its value came from, and why it is wrong."""
    problems = []
    for e in exc.errors():
        name = ".".join(map(str, e["loc"]))
        msg = str(e["msg"]).removeprefix("Value error, ")
        where = f" ({source(str(e['loc'][0]))})" if source and e["loc"] else ""
        problems.append(f"{name or 'settings'}{where}: {msg}")
    return "invalid configuration: " + "; ".join(problems)


def load_settings(config_file: Path | None = None, *, reset: Collection[str] = (), **overrides: Any) -> Settings:
    """Settings from defaults, a TOML file (optional), the environment and explicit overrides (flags).

    ``None`` in ``overrides`` means "not given"; ``reset`` names settings taken from their default
    whatever the environment or the file say (the demo's cluster connection).
    """
    unknown = unknown_env()
    if unknown:
        raise ConfigError(unknown)
    env_path = os.environ.get(CONFIG_VARIABLE)
    path = config_file or (Path(env_path) if env_path else None)
    if path is not None and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    from_file = read_toml(path) if path is not None else {}

    values = {k: v for k, v in overrides.items() if v is not None}
    flags = set(values)
    env = env_names()
    for group in EXCLUSIVE:
        for layer in (flags, set(env), set(from_file)):
            if layer & group:
                for name in group - layer:
                    values.setdefault(name, _default(name))
                break
    for name in reset:
        values.setdefault(name, _default(name))
    reading = _FILE_VALUES.set(from_file)
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, lambda n: _source(n, flags, env, path))) from None
    except SettingsError as exc:  # pydantic-settings could not decode an environment value as JSON
        raise ConfigError(_undecodable(str(exc))) from None
    finally:
        _FILE_VALUES.reset(reading)


def _json(text: str, kind: type, forms: str) -> Any:
    """A setting given as JSON (in the environment, or a flag): decoded, or a sentence saying what it takes."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"not valid JSON; give {forms}") from None
    if not isinstance(value, kind):
        raise ValueError(f"give {forms}")
    return value


def _undecodable(message: str) -> str:
    """pydantic-settings' 'error parsing value for field "x" from source "EnvSettingsSource"' (a structured
    setting whose environment value is not JSON), as a sentence that names the variable."""
    m = re.search(r'field "(\w+)"', message)
    name = m.group(1) if m else ""
    if name not in Settings.model_fields:
        return f"invalid configuration: {message}"
    return (
        f"invalid configuration: {name} (env {ENV_PREFIX}{name.upper()}): not valid JSON; give it as JSON "
        "(as the config file's table would be), or set it in the config file"
    )
