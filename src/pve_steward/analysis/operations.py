"""Operations: failed tasks, certificates, APT repositories and updates, disk SMART, ZFS pools."""

from __future__ import annotations

import re
from collections import defaultdict

from pve_steward.analysis.catalog import Code, Threshold, check
from pve_steward.analysis.data import ClusterData, Row
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds
from pve_steward.analysis.upgradeinfo import NODE_CONFIG
from pve_steward.pve.tasks import task_running

_PVE_PACKAGES = ("pve-", "proxmox-", "qemu-server", "libpve-", "corosync", "pve-manager")


@check(
    "operations",
    codes=[
        Code(
            "TASK_FAILED_RECENT",
            "warning",
            "Failed tasks",
            "Tasks that ended in error in the last task_window_hours (24 h), grouped by node and type.",
            "Read the newest failure's log (get_task).",
        ),
    ],
    thresholds=[
        Threshold("task_window_hours", 24, "how far back failed tasks are examined", minimum=None, above=0),
    ],
    anchors=[
        "cv4pve-diag:CN0005=TASK_FAILED_RECENT",
    ],
    pve="pve-common src/PVE/UPID.pm read_status + status_is_error",
)
@pve_rule(
    "tasks.failed",
    rule="A finished task's status is 'OK', 'WARNINGS: <n>' or an error text (the last 'TASK ERROR:' line, or "
    "'unexpected status' when the log ends without a TASK line); only the last two are errors. The node's task "
    "list sends a task still running with status 'RUNNING'.",
    pve="pve-common src/PVE/UPID.pm read_status + status_is_error; pve-manager PVE/API2/Tasks.pm node_tasks",
    codes=("TASK_FAILED_RECENT",),
)
def analyze_tasks(data: ClusterData, t: Thresholds) -> list[Finding]:
    since = data.now - t.get("task_window_hours") * 3600
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for task in data.tasks:
        status = task.get("status")
        if task_running(task) or status == "OK" or str(status).startswith("WARNINGS"):
            continue
        if int(task.get("starttime", 0)) >= since:
            groups[(str(task.get("node")), str(task.get("type")))].append(task)
    out = []
    for (node, ttype), rows in sorted(groups.items()):
        rows.sort(key=lambda r: int(r.get("starttime", 0)), reverse=True)
        newest = rows[0]
        out.append(
            finding(
                "TASK_FAILED_RECENT",
                Subject(kind="task", id=f"{node}/{ttype}", node=node),
                f"{len(rows)} failed {ttype} task(s) on {node} in {t.get('task_window_hours'):.0f} h; newest: "
                f"{newest.get('status')}",
                {
                    "count": len(rows),
                    "type": ttype,
                    "newest_upid": newest.get("upid"),
                    "newest_status": newest.get("status"),
                    "ids": sorted({str(r["id"]) for r in rows if r.get("id")}),  # node-wide tasks have no id
                },
            )
        )
    return out


# PVE/NodeConfig.pm get_acme_conf: ACME domains come from 'acme: domains=...' or 'acmedomainN' entries
_ACME_DOMAIN_KEY = re.compile(r"^acmedomain\d+$")


@pve_rule(
    "certificates.renewal",
    rule="pve-daily-update renews a node's pve-ssl.pem (issued by the cluster CA) once less than 14 days are left, "
    "and an ACME certificate (pveproxy-ssl.pem with ACME domains in the node config) once less than 30 are; "
    "nothing renews an uploaded certificate or the cluster CA.",
    pve="pve-manager bin/pveupdate (check_expiry 14 and 30 days); PVE/NodeConfig.pm get_acme_conf",
    codes=("CERT_EXPIRING", "CERT_EXPIRED"),
)
def renewed_at(cert: Row, ca_subject: object, node_config: Row | None) -> int | None:
    """Days before expiry at which PVE renews this certificate itself; None when nothing does (or, without the
    node config, when that cannot be known)."""
    name = cert.get("filename")
    if name == "pve-ssl.pem" and ca_subject is not None and cert.get("issuer") == ca_subject:
        return 14
    if name == "pveproxy-ssl.pem" and node_config is not None:
        acme = str(node_config.get("acme") or "")
        if "domains=" in acme or any(_ACME_DOMAIN_KEY.match(str(k)) for k in node_config):
            return 30
    return None


@check(
    "operations",
    codes=[
        Code(
            "CERT_EXPIRED",
            "critical",
            "Certificate expired",
            "notafter is in the past.",
            "Renew it (pvenode acme cert order for ACME, pvecm updatecerts --force for pve-ssl.pem, or upload a new "
            "one); if PVE renews it itself, find why pve-daily-update did not (journalctl -u pve-daily-update).",
        ),
        Code(
            "CERT_EXPIRING",
            "warning",
            "Certificate expiring",
            "Expires within cert_warning_days (30), critical within cert_critical_days (7). A certificate PVE renews "
            "itself (pve-ssl.pem: 14 days before expiry; an ACME certificate: 30) counts only once its renewal day "
            "has passed without one: then the daily renewal is failing.",
            "Renew it; for a certificate PVE renews, read why pve-daily-update failed (journalctl -u "
            "pve-daily-update) and fix that.",
        ),
    ],
    thresholds=[
        Threshold("cert_warning_days", 30, "a certificate expiring within this many days warns", minimum=None, above=0),
        Threshold(
            "cert_critical_days", 7, "a certificate expiring within this many days is critical", minimum=None, above=0
        ),
    ],
    needs=[NODE_CONFIG],
    anchors=[
        "cv4pve-diag:CN0003=CERT_EXPIRED",
        "cv4pve-diag:WN0023=CERT_EXPIRING",
        "check_pve:certificate=CERT_EXPIRING/CERT_EXPIRED",
    ],
    pve="pve-manager PVE/API2/Certificates.pm info (notafter), bin/pveupdate",
)
def analyze_certificates(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node, certs in sorted(data.certificates.items()):
        ca = next((c.get("subject") for c in certs if c.get("filename") == "pve-root-ca.pem"), None)
        for cert in certs:
            notafter = cert.get("notafter")
            if notafter is None:
                continue
            days = (int(notafter) - data.now) / 86400
            renew = renewed_at(cert, ca, data.read(NODE_CONFIG.key, node))
            found = _certificate_finding(node, cert, days, renew, t)
            if found is not None:
                out.append(found)
    return out


def _certificate_finding(node: str, cert: Row, days: float, renew: int | None, t: Thresholds) -> Finding | None:
    """A day of slack past PVE's own renewal point: pve-daily-update runs once a day, at a random time."""
    if days >= 0 and (days > t.get("cert_warning_days") or (renew is not None and days >= renew - 1)):
        return None
    name = cert.get("filename")
    subject = Subject(kind="certificate", id=f"{node}/{name}", node=node)
    evidence = {
        "filename": name,
        "notafter": cert.get("notafter"),
        "days_left": round(days, 1),
        "subject": cert.get("subject"),
        "renewed_by_pve_at_days": renew,
    }
    missed = f"; PVE renews it {renew} days before expiry, so pve-daily-update failed to renew it" if renew else ""
    if days < 0:
        return finding("CERT_EXPIRED", subject, f"{name} on {node} expired {-days:.0f} days ago{missed}", evidence)
    sev = Severity.CRITICAL if days <= t.get("cert_critical_days") else Severity.WARNING
    message = f"{name} on {node} expires in {days:.0f} days{missed}"
    return finding("CERT_EXPIRING", subject, message, evidence, severity=sev)


@pve_rule(
    "apt.standard-repos",
    rule="The repository panel warns when an enterprise repository (PVE's or a ceph-<release>-enterprise one) is "
    "enabled without an active subscription, and reports no updates only when none of enterprise, "
    "no-subscription and test is enabled.",
    pve="proxmox-widget-toolkit src/node/APTRepositories.js updateState, updateStandardRepos",
    codes=("REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION", "REPO_NO_PVE_REPO"),
)
def enterprise_repos(status: dict[str, object]) -> list[str]:
    """The enabled enterprise repositories among the standard ones (PVE's and Ceph's)."""
    return sorted(h for h, s in status.items() if s == 1 and re.fullmatch(r"enterprise|ceph-[a-zA-Z]+-enterprise", h))


@check(
    "operations",
    codes=[
        Code(
            "REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION",
            "warning",
            "Enterprise repository without subscription",
            "The pve-enterprise or a Ceph enterprise repository is enabled but the subscription is not active: apt "
            "update fails (401).",
            "Add a subscription or switch to the no-subscription repository.",
        ),
        Code(
            "REPO_NO_PVE_REPO",
            "warning",
            "No Proxmox VE repository enabled",
            "Neither enterprise, no-subscription nor test is enabled: no updates.",
            "Enable one of them.",
        ),
        Code(
            "REPO_TEST_ENABLED",
            "warning",
            "Test repository enabled",
            "The pvetest repository is enabled on a node.",
            "Disable it on production nodes.",
        ),
        Code(
            "REPO_NO_SUBSCRIPTION",
            "info",
            "No-subscription repository",
            "The no-subscription repository is in use (not recommended for production by Proxmox).",
            "Fine for test clusters; for production use a subscription and the enterprise repository.",
        ),
    ],
    pve="pve-manager PVE/API2/APT.pm repositories (standard-repos); PVE/API2/Subscription.pm get",
)
def analyze_repositories(data: ClusterData, t: Thresholds | None = None) -> list[Finding]:
    out = []
    for node, repos in sorted(data.repositories.items()):
        status = {str(r.get("handle")): r.get("status") for r in repos.get("standard-repos") or []}
        subject = Subject(kind="repository", id=node, node=node)
        enterprise, nosub, test = (
            status.get("enterprise") == 1,
            status.get("no-subscription") == 1,
            status.get("test") == 1,
        )
        sub = data.subscriptions.get(node)
        paid = enterprise_repos(status)
        if paid and sub is not None and sub.get("status") != "active":
            out.append(
                finding(
                    "REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION",
                    subject,
                    f"{node}: enterprise repositories enabled ({', '.join(paid)}) but the subscription is "
                    f"'{sub.get('status')}'",
                    {"subscription": sub.get("status"), "repositories": paid},
                )
            )
        if not enterprise and not nosub and not test:
            out.append(
                finding(
                    "REPO_NO_PVE_REPO",
                    subject,
                    f"{node}: no Proxmox VE repository is enabled",
                    {"standard_repos": status},
                )
            )
        if test:
            out.append(finding("REPO_TEST_ENABLED", subject, f"{node}: the pvetest repository is enabled"))
        if nosub and not enterprise:
            out.append(finding("REPO_NO_SUBSCRIPTION", subject, f"{node}: uses the no-subscription repository"))
    return out


@check(
    "operations",
    codes=[
        Code(
            "UPDATES_PENDING",
            "info",
            "Updates pending",
            "APT reports upgradable packages (as of the last refresh).",
            "Plan a rolling update.",
        ),
    ],
    anchors=[
        "cv4pve-diag:IN0001=UPDATES_PENDING",
        "check_pve:updates=UPDATES_PENDING",
        "pve8to9:pkg-updates=UPDATES_PENDING",
    ],
    pve="pve-manager PVE/API2/APT.pm list_updates",
)
def analyze_updates(data: ClusterData, t: Thresholds | None = None) -> list[Finding]:
    out = []
    for node, updates in sorted(data.updates.items()):
        if not updates:
            continue
        pve = sorted(str(u.get("Package")) for u in updates if str(u.get("Package", "")).startswith(_PVE_PACKAGES))
        out.append(
            finding(
                "UPDATES_PENDING",
                Subject(kind="node", id=node),
                f"{node}: {len(updates)} package update(s) pending"
                + (f", including {', '.join(pve[:5])}" if pve else ""),
                {"count": len(updates), "proxmox_packages": pve},
            )
        )
    return out


@pve_rule(
    "disks.smart-health",
    rule="get_disks gives a disk's health as smartctl's self-assessment result (PASSED, FAILED!) or SAS Health "
    "Status (OK, ...), 'UNKNOWN' when smartctl said nothing, and 'SMART Disabled' when SMART is switched off.",
    pve="pve-storage src/PVE/Diskmanage.pm get_smart_data, get_disks",
    codes=("DISK_SMART_FAILED",),
)
def smart_failed(health: str) -> bool:
    """A health that reports a failing disk: not a pass, not unknown, not SMART switched off."""
    return health.upper() not in ("PASSED", "OK", "UNKNOWN", "SMART DISABLED")


@check(
    "operations",
    codes=[
        Code(
            "DISK_SMART_FAILED",
            "critical",
            "Disk failing SMART",
            "health is neither PASSED/OK nor UNKNOWN or 'SMART Disabled' (no verdict from the drive).",
            "Replace the disk.",
        ),
        Code(
            "DISK_WEAROUT_HIGH",
            "warning",
            "SSD wearing out",
            "Remaining life at or below wearout_warning_pct (30 %); critical at wearout_critical_pct (15 %).",
            "Plan the replacement.",
        ),
        Code(
            "ZFS_POOL_DEGRADED",
            "critical",
            "ZFS pool not healthy",
            "health is not ONLINE.",
            "zpool status -x on the node; replace the failed device.",
        ),
    ],
    thresholds=[
        Threshold("wearout_warning_pct", 30, "remaining life", maximum=100),
        Threshold("wearout_critical_pct", 15, "remaining life", maximum=100),
    ],
    anchors=[
        "cv4pve-diag:WN0016=DISK_SMART_FAILED",
        "cv4pve-diag:WN0018=DISK_WEAROUT_HIGH",
        "cv4pve-diag:CN0010=ZFS_POOL_DEGRADED",
        "check_pve:disk-health=DISK_SMART_FAILED/DISK_WEAROUT_HIGH",
        "check_pve:zfs-health=ZFS_POOL_DEGRADED",
    ],
    pve="pve-storage src/PVE/Diskmanage.pm get_disks (health, wearout); src/PVE/API2/Disks/ZFS.pm index",
)
def analyze_hardware(data: ClusterData, t: Thresholds) -> list[Finding]:
    out = []
    for node, disks in sorted(data.disks.items()):
        for disk in disks:
            subject = Subject(kind="disk", id=f"{node}:{disk.get('devpath')}", node=node)
            health = str(disk.get("health") or "UNKNOWN").upper()
            evidence = {
                "devpath": disk.get("devpath"),
                "model": disk.get("model"),
                "serial": disk.get("serial"),
                "health": health,
            }
            if smart_failed(health):
                out.append(
                    finding(
                        "DISK_SMART_FAILED",
                        subject,
                        f"{node}: disk {disk.get('devpath')} ({disk.get('model')}) SMART health {health}",
                        evidence,
                    )
                )
            wear = disk.get("wearout")
            if isinstance(wear, int | float) and not isinstance(wear, bool) and wear <= t.get("wearout_warning_pct"):
                sev = Severity.CRITICAL if wear <= t.get("wearout_critical_pct") else Severity.WARNING
                out.append(
                    finding(
                        "DISK_WEAROUT_HIGH",
                        subject,
                        f"{node}: disk {disk.get('devpath')} has {wear} % life left",
                        {**evidence, "remaining_pct": wear},
                        severity=sev,
                    )
                )
    for node, pools in sorted(data.zfs.items()):
        for pool in pools:
            if str(pool.get("health")).upper() != "ONLINE":
                out.append(
                    finding(
                        "ZFS_POOL_DEGRADED",
                        Subject(kind="zfs_pool", id=f"{node}:{pool.get('name')}", node=node),
                        f"{node}: ZFS pool {pool.get('name')} is {pool.get('health')}",
                        {"health": pool.get("health"), "size": pool.get("size"), "alloc": pool.get("alloc")},
                    )
                )
    return out
