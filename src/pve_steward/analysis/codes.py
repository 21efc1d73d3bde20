"""The registry of finding codes: the public contract.

Codes never change meaning and are never reused; adding one is a minor change, changing or
removing one is a major change with a design record. ``docs/tools.md`` is generated from this
table and a test fails if a code is emitted that is not here.
"""

from __future__ import annotations

from pve_steward.analysis.catalog import AREAS, CODES, CodeInfo, load_checks, register_code

__all__ = ["AREAS", "CODES", "CodeInfo", "render_codes"]

# The codes of the checks written before checks became units (design record 261203-14); new checks
# declare their codes with ``@check`` in ``analysis/checks/`` and this table only shrinks.
_TABLE: list[tuple[str, str, str, str, str, str]] = [
    # area, code, severity, title, rule, remediation
    (
        "data",
        "DATA_INCOMPLETE",
        "warning",
        "Some data could not be read",
        "A read failed (node offline, missing privilege, timeout). Checks depending on it were not done; "
        "the report is not a clean bill of health.",
        "Fix the cause named in the evidence (bring the node back, grant the privilege) and run the check again.",
    ),
    (
        "data",
        "ANALYSIS_FAILED",
        "warning",
        "An area could not be analysed",
        "The cluster answered with a value of an unexpected type or form (text where a number belongs, "
        "a list where a name belongs), and the area's checks stopped there. Its findings are incomplete; "
        "the other areas are reported as usual.",
        "Look at the value named in the evidence. If PVE returned it, report it with the PVE version.",
    ),
    (
        "data",
        "CHECK_SKIPPED",
        "info",
        "A check was limited on purpose",
        "A check was skipped or capped by configuration (e.g. guest-agent probes above agent_probe_limit).",
        "Nothing to fix; raise the limit named in the evidence if the check must cover everything.",
    ),
    # ---------------------------------------------------------------- cluster and HA
    (
        "cluster",
        "CLUSTER_NOT_QUORATE",
        "critical",
        "Cluster has no quorum",
        "/cluster/status reports quorate=0: pmxcfs is read-only, no migration, config change or HA recovery works.",
        "Restore corosync connectivity to a majority of nodes (pvecm status).",
    ),
    (
        "cluster",
        "CLUSTER_STANDALONE",
        "info",
        "Single node without a cluster",
        "No cluster entry in /cluster/status.",
        "Nothing to fix; migration, HA and replication need a cluster (pvecm create).",
    ),
    (
        "cluster",
        "NODE_OFFLINE",
        "warning",
        "Node offline",
        "A configured node reports online=0. Critical when online nodes are half or fewer.",
        "Check the node's power, network and corosync links; its guests are unreachable or being recovered.",
    ),
    (
        "cluster",
        "NODE_VERSION_MISMATCH",
        "warning",
        "Nodes run different PVE versions",
        "Online nodes report different pve-manager versions; migration targets must run the same or newer.",
        "Finish the rolling upgrade on every node.",
    ),
    (
        "ha",
        "HA_NO_MASTER",
        "critical",
        "No active HA manager",
        "HA resources exist but no active CRM master is reported.",
        "Check pve-ha-crm on all nodes (ha-manager status).",
    ),
    (
        "ha",
        "HA_LRM_DEAD",
        "critical",
        "HA local resource manager not answering",
        "An LRM status has an old timestamp ('old timestamp - dead?') on a node that should be online.",
        "Check pve-ha-lrm on the node; a node whose LRM is gone cannot run or receive HA services.",
    ),
    (
        "ha",
        "HA_RESOURCE_ERROR",
        "critical",
        "HA resource in error state",
        "CRM state 'error': HA no longer manages it.",
        "ha-manager set <sid> --state disabled, fix the cause, then --state started.",
    ),
    (
        "ha",
        "HA_RESOURCE_FENCING",
        "critical",
        "HA resource waiting for fencing or recovery",
        "CRM state 'fence' or 'recovery': its node failed and the resource is not running anywhere.",
        "Bring the failed node back or make sure it is fenced; check that another node can take the resource.",
    ),
    (
        "ha",
        "HA_RESOURCE_STATE_MISMATCH",
        "warning",
        "HA resource not in its requested state",
        "The CRM state differs from the requested state (e.g. requested started, stopped) and is not a transition.",
        "Check the resource's HA log (journalctl -u pve-ha-lrm) on its node.",
    ),
    (
        "ha",
        "HA_NODE_MAINTENANCE",
        "info",
        "Node in HA maintenance mode",
        "The LRM reports maintenance mode; HA moved or will move its services away.",
        "ha-manager crm-command node-maintenance disable <node> when the work is done.",
    ),
    (
        "ha",
        "HA_RULE_NO_TARGET",
        "warning",
        "HA constraints leave a resource nowhere to go",
        "A strict node-affinity rule or restricted group allows no online node other than the current one. "
        "Critical when none of its allowed nodes is online.",
        "Widen the rule/group or bring the allowed nodes back.",
    ),
    (
        "ha",
        "HA_RULE_ERRORS",
        "warning",
        "HA rule disabled or infeasible",
        "An HA rule is disabled or PVE reports errors for it (infeasible rules are not applied).",
        "Fix the rule (ha-manager rules config) so it can be applied.",
    ),
    (
        "ha",
        "HA_GUEST_NOT_MIGRATABLE",
        "critical",
        "HA guest cannot be moved",
        "An HA-managed guest has a migration blocker (passthrough, local disk without replication, bind mount): "
        "failover and node maintenance will stall on it.",
        "Remove the blocker or take the guest out of HA.",
    ),
    (
        "ha",
        "HA_DISARMED",
        "warning",
        "HA disarmed",
        "The HA stack is disarmed: no fencing, failover or recovery.",
        "Re-arm HA (POST /cluster/ha/status/arm-ha).",
    ),
    # ---------------------------------------------------------------- backups
    (
        "backups",
        "BACKUP_NONE",
        "critical",
        "Guest has no backup",
        "No backup of the guest on any backup storage the token can read (templates excluded).",
        "Run a backup now and make sure an enabled job covers the guest.",
    ),
    (
        "backups",
        "BACKUP_STALE",
        "warning",
        "Newest backup too old",
        "Newest backup older than the covering enabled job's interval + grace (10 %, at least 2 h), else "
        "backup_stale_default_hours (26 h). Critical beyond backup_stale_critical_factor (2x) the threshold.",
        "Check the covering job's last runs (BACKUP_JOB_FAILED) and run a backup now.",
    ),
    (
        "backups",
        "BACKUP_NOT_SCHEDULED",
        "warning",
        "Guest covered by no enabled backup job",
        "No enabled vzdump job includes the guest (all/exclude, vmid list, node filter), cross-checked with "
        "/cluster/backup-info/not-backed-up (which counts disabled jobs as covering).",
        "Add the guest to an enabled backup job.",
    ),
    (
        "backups",
        "BACKUP_JOB_FAILED",
        "critical",
        "Last backup run failed",
        "The newest vzdump task for a node and job in the last backup_task_window_hours (48 h) ended with an error.",
        "Read the task log (get_task), fix the cause, and rerun the backup.",
    ),
    (
        "backups",
        "BACKUP_VERIFY_FAILED",
        "critical",
        "Newest backup failed verification",
        "On PBS storage the newest backup's verification state is 'failed'. (Until 261203-5 a backup without "
        "verification was reported here as a warning; that is now BACKUP_NOT_VERIFIED.)",
        "Investigate the PBS datastore (proxmox-backup-manager verify) and take a fresh backup.",
    ),
    (
        "backups",
        "BACKUP_NOT_VERIFIED",
        "info",
        "Newest backup not verified yet",
        "On PBS storage the newest backup has no verification state: no verify job has checked it yet "
        "(PBS lists verification only after one ran). Unverified is not failed.",
        "Schedule a verify job on the PBS datastore (or enable verify-new) if backups must be proven readable.",
    ),
    (
        "backups",
        "BACKUP_JOB_DISABLED",
        "info",
        "Backup job disabled",
        "A vzdump job has enabled=0; PVE still counts it as covering its guests.",
        "Enable or delete the job.",
    ),
    (
        "backups",
        "BACKUP_JOB_NO_RETENTION",
        "warning",
        "Backup job without retention",
        "vzdump keeps every backup: the job, its storage and the node's /etc/vzdump.conf set no prune-backups "
        "(PVE's default is keep-all=1), or remove=0. maxfiles counts as keep-last on PVE 8 only. On a PBS storage "
        "it also needs no PBS prune job and no datastore keep-* to prune it (judged only with a PBS connection).",
        "Set prune-backups on the job or the storage.",
    ),
    (
        "backups",
        "BACKUP_DISK_EXCLUDED",
        "warning",
        "Disk excluded from backups",
        "A guest disk has backup=0: it is silently missing from every backup.",
        "Remove backup=0 unless the disk is deliberately disposable.",
    ),
    (
        "backups",
        "BACKUP_ORPHANED",
        "info",
        "Backup of a guest that no longer exists",
        "Backups exist for a vmid that is not in the cluster.",
        "Prune them if they are not needed for restore.",
    ),
    # ---------------------------------------------------------------- migratability
    (
        "migration",
        "MIGRATE_PASSTHROUGH",
        "warning",
        "Pinned by a local device",
        "hostpci/usb/serial/parallel/ivshmem/virtiofs without a mapping: PVE refuses to migrate.",
        "Use a resource mapping present on the target, or plan downtime.",
    ),
    (
        "migration",
        "MIGRATE_MAPPED_DEVICE",
        "warning",
        "Mapped device missing on target or not live-capable",
        "A mapped device has no mapping entry on the target, or (running VM) is not marked live-migration capable.",
        "Add the mapping on the target node or migrate offline.",
    ),
    (
        "migration",
        "MIGRATE_LOCAL_CDROM",
        "warning",
        "ISO or host drive in a CD-ROM",
        "A CD-ROM holds an ISO on local storage or the host drive: PVE cannot migrate it.",
        "Eject the CD-ROM.",
    ),
    (
        "migration",
        "MIGRATE_LOCAL_DISK",
        "info",
        "Local disk must be copied",
        "A disk is on non-shared storage: migration copies it (with-local-disks for a running VM).",
        "Expect network and time cost proportional to the disk size.",
    ),
    (
        "migration",
        "MIGRATE_LOCAL_DISK_UNSUPPORTED",
        "warning",
        "Local disk cannot be migrated",
        "A local disk is on a storage type PVE cannot migrate, or a host path, or has a non-migratable snapshot.",
        "Move the disk to shared storage or remove the snapshot.",
    ),
    (
        "migration",
        "MIGRATE_STORAGE_UNAVAILABLE",
        "warning",
        "Storage not available on target",
        "A volume's storage is restricted to other nodes or disabled on the target.",
        "Pick another target or make the storage available there.",
    ),
    (
        "migration",
        "MIGRATE_LOCKED",
        "warning",
        "Guest is locked",
        "The guest config has a lock; PVE refuses every migration until it is cleared.",
        "Wait for the locking task, or clear the lock with guest_unlock if it is truly gone.",
    ),
    (
        "migration",
        "MIGRATE_CPU_HOST",
        "warning",
        "cpu: host on heterogeneous nodes",
        "A running VM uses cpu type host and the target's CPU model differs: live migration can crash it. "
        "Treated as a blocker because it cannot be proven safe.",
        "Use a CPU model every node supports (e.g. x86-64-v2-AES), or migrate offline.",
    ),
    (
        "migration",
        "MIGRATE_BIND_MOUNT",
        "warning",
        "Container bind mount",
        "A container mount point is a host path not marked shared=1.",
        "Mark it shared if it exists on every node.",
    ),
    (
        "migration",
        "MIGRATE_CT_DEVICE",
        "warning",
        "Container device passthrough",
        "A container passes a host device (devN) or raw lxc.* keys: PVE does not check them, the target may lack them.",
        "Make sure the device exists on the target, then migrate deliberately.",
    ),
    (
        "migration",
        "MIGRATE_REPLICATION",
        "warning",
        "Replication conflict",
        "A replication job is marked for removal, or a running VM would move to a node that is not its replication "
        "target.",
        "Migrate to the replication target or fix the job.",
    ),
    (
        "migration",
        "MIGRATE_RESTART_REQUIRED",
        "info",
        "Container needs restart migration",
        "Running containers cannot live-migrate: PVE stops, moves and starts them (downtime).",
        "Plan the downtime or migrate in a maintenance window.",
    ),
    (
        "migration",
        "MIGRATE_DOWNTIME_NOT_ALLOWED",
        "warning",
        "Only an offline move is possible",
        "The guest can only move with downtime (offline or restart) and that was not allowed.",
        "Allow offline moves, or deal with the guest separately.",
    ),
    (
        "migration",
        "MIGRATE_HA_MANAGED",
        "info",
        "HA-managed guest",
        "The HA manager moves this guest; direct migration is turned into an HA request.",
        "Use HA node maintenance (ha-manager crm-command node-maintenance enable <node>) or HA migrate.",
    ),
    (
        "migration",
        "MIGRATE_NO_TARGET",
        "warning",
        "No eligible target node",
        "No online node outside HA maintenance (and allowed by the request) can take the guest.",
        "Bring nodes online or widen the allowed targets.",
    ),
    (
        "migration",
        "MIGRATE_CAPACITY",
        "warning",
        "No target has room",
        "No eligible target has the guest's configured memory free (plus headroom) after earlier placements.",
        "Free memory on a target, lower the headroom, or move fewer guests.",
    ),
    (
        "migration",
        "MIGRATE_PVE_DISAGREES",
        "warning",
        "PVE's precondition disagrees",
        "PVE's GET .../migrate answer and our reading of the config differ; the stricter answer wins.",
        "Look at the evidence; report it if our reading is wrong.",
    ),
    (
        "migration",
        "MIGRATE_NOT_PROVABLE",
        "warning",
        "Migratability could not be proven",
        "Data needed to prove the move is safe is missing (config unreadable, node status unknown).",
        "Fix the missing data (DATA_INCOMPLETE) and plan again.",
    ),
    (
        "migration",
        "MIGRATE_TEMPLATE",
        "info",
        "Template",
        "Templates are moved offline; they do not run.",
        "Nothing to fix; move it offline (no downtime, it does not run).",
    ),
    (
        "migration",
        "MIGRATE_STORAGE_CONTENT",
        "warning",
        "Storage lacks the volume's content type",
        "A volume lives on a storage whose content list lacks its type (images or iso for a VM, rootdir for a "
        "container); PVE refuses to migrate it (qemu-server check_storage_availability, LXC Migrate prepare).",
        "Add the content type to the storage (Datacenter > Storage) or move the volume to a storage that has it.",
    ),
    (
        "migration",
        "MIGRATE_LINKED_CLONE",
        "warning",
        "Linked clone on local storage",
        "A local volume is a linked clone of a base image, or a template's base image still used by linked clones; "
        "PVE refuses to migrate it (QemuMigrate scan_local_volumes, volume_is_base_and_used).",
        "Make the clone a full clone (move the disk), or migrate template and clones together by moving storage.",
    ),
    (
        "migration",
        "MIGRATE_LIVE_UNSUPPORTED",
        "warning",
        "Running VM cannot move live",
        "PVE refuses a live migration of this running VM (amd-sev, intel-tdx, virtiofs, mapped devices that are not "
        "live-migration capable, clipboard=vnc, a non-replicated local volume referenced by a snapshot); it can move "
        "once it is shut down.",
        "Plan downtime: shut it down, migrate offline, start it (allow_offline).",
    ),
    (
        "migration",
        "MIGRATE_HA_AFFINITY",
        "warning",
        "HA affinity rules forbid the target",
        "An HA rule keeps the guest off the target: a strict node-affinity rule (or restricted group), or a "
        "negative resource-affinity with a resource there (PVE's blocking-ha-resources).",
        "Pick an allowed node, or change the HA rule.",
    ),
    (
        "ha",
        "HA_GUEST_LEFT_BEHIND",
        "warning",
        "HA maintenance leaves this guest on the node",
        "The HA manager moves started services off a node in maintenance; a service in error state, or requested "
        "stopped or disabled, stays on the node (pve-ha-manager Manager.pm).",
        "Error state: ha-manager set <sid> --state disabled, fix, migrate, re-enable. Stopped/disabled: "
        "ha-manager migrate <sid> <target>, or leave it on the node.",
    ),
    # ---------------------------------------------------------------- capacity
    (
        "capacity",
        "STORAGE_USAGE_HIGH",
        "warning",
        "Storage nearly full",
        "used/total at or above storage_warning_pct (80 %); critical at storage_critical_pct (90 %). Shared storage "
        "is counted once.",
        "Free space, extend the storage, or move volumes.",
    ),
    (
        "capacity",
        "STORAGE_INACTIVE",
        "critical",
        "Storage enabled but not active",
        "An enabled storage is not active on an online node: guests on it cannot start there.",
        "Check the storage backend (mount, network, pool) on that node.",
    ),
    (
        "capacity",
        "STORAGE_THIN_OVERCOMMIT",
        "warning",
        "Thin storage overcommitted",
        "Sum of virtual disk sizes on a thin storage exceeds its capacity x thin_overcommit_ratio; critical when "
        "usage is also at the storage warning threshold.",
        "Watch usage closely; a full thin pool causes I/O errors.",
    ),
    (
        "capacity",
        "NODE_MEMORY_OVERCOMMIT",
        "warning",
        "Node memory overcommitted",
        "Sum of configured memory of running guests above memory_overcommit_warning_pct (100 %) of node memory; "
        "critical above memory_overcommit_critical_pct (150 %).",
        "Move guests away or add memory.",
    ),
    (
        "capacity",
        "NODE_MEMORY_PRESSURE",
        "warning",
        "Node memory nearly exhausted",
        "used/total at or above memory_pressure_warning_pct (85 %); critical at memory_pressure_critical_pct (95 %).",
        "Move guests away; check ZFS ARC size.",
    ),
    (
        "capacity",
        "NODE_SWAP_USED",
        "warning",
        "Node swapping",
        "swap used at or above swap_warning_pct (20 %) of swap; critical at swap_critical_pct (50 %).",
        "Relieve memory pressure on the node.",
    ),
    (
        "capacity",
        "NODE_VCPU_OVERCOMMIT",
        "warning",
        "vCPU overcommit high",
        "vCPUs of running guests per logical CPU above vcpu_ratio_warning (4:1).",
        "Rebalance CPU-heavy guests.",
    ),
    (
        "capacity",
        "CLUSTER_NO_N_PLUS_1",
        "warning",
        "Cluster cannot absorb a node failure",
        "The configured memory of running guests does not fit on the cluster minus its largest node.",
        "Add capacity or reduce the running set; HA recovery would overload the survivors.",
    ),
    # ---------------------------------------------------------------- replication
    (
        "replication",
        "REPLICATION_FAILING",
        "warning",
        "Replication failing",
        "A job has fail_count > 0; critical at replication_fail_critical (3) or more.",
        "Read the job's error and fix the target or storage.",
    ),
    (
        "replication",
        "REPLICATION_STALE",
        "warning",
        "Replication lagging",
        "now - last_sync exceeds replication_lag_factor (4) x the schedule interval, or the job never synced and "
        "its first sync failed. A job whose first sync is still pending is not stale.",
        "Check the job's schedule and errors.",
    ),
    (
        "replication",
        "REPLICATION_DISABLED",
        "info",
        "Replication job disabled",
        "A job has disable=1.",
        "Enable it with replication_set_enabled if the replica should stay current, or delete the job.",
    ),
    (
        "replication",
        "REPLICATION_PENDING_REMOVAL",
        "info",
        "Replication job marked for removal",
        "remove_job is set; it also blocks migration until removed.",
        "Nothing to fix unless it stays: PVE removes the job on its next run (check pvesr status on the node).",
    ),
    # ---------------------------------------------------------------- guests
    (
        "guests",
        "GUEST_LOCK_STUCK",
        "critical",
        "Stuck guest lock",
        "A lock is set, no running task holds the guest, and the last related task ended more than "
        "lock_stuck_minutes (60) ago (or none is known).",
        "Make sure the locking action is truly gone (no task of the guest still runs), then clear the lock "
        "with guest_unlock, or with qm unlock / pct unlock on the node.",
    ),
    (
        "guests",
        "GUEST_LOCKED",
        "info",
        "Guest locked by a running task",
        "A lock is held by an active task.",
        "Nothing to fix; wait for the task to end (get_task) before changing the guest.",
    ),
    (
        "guests",
        "SNAPSHOT_OLD",
        "warning",
        "Old snapshot",
        "A snapshot is older than snapshot_age_days (30): it keeps growing and slows I/O.",
        "Delete it if it is no longer needed.",
    ),
    (
        "guests",
        "SNAPSHOT_COUNT_HIGH",
        "warning",
        "Many snapshots",
        "More than snapshot_count (10) snapshots.",
        "Delete the snapshots that are no longer needed (list_snapshots shows age and parent); each slows I/O.",
    ),
    (
        "guests",
        "GUEST_AGENT_NOT_RUNNING",
        "warning",
        "Guest agent not answering",
        "A running VM has the agent enabled and PVE answers 'QEMU guest agent is not running' (its guest-ping "
        "failed): no fs-freeze for backups, no IPs, shutdown falls back to ACPI. A probe that could not be made "
        "(403, unreachable node, other errors) is reported as DATA_INCOMPLETE/CHECK_SKIPPED instead.",
        "Install or start qemu-guest-agent in the guest.",
    ),
    (
        "guests",
        "GUEST_NO_ONBOOT",
        "info",
        "Running guest does not start on boot",
        "A running, non-template guest that is not an HA resource has onboot unset (start-all skips HA "
        "resources: HA starts them).",
        "Set onboot=1 if it must come back after a node reboot.",
    ),
    (
        "guests",
        "GUEST_HIBERNATED",
        "info",
        "Guest hibernated",
        "A VM is suspended to disk (lock suspended).",
        "Resume it (start) when it is needed; it cannot migrate while hibernated.",
    ),
    # ---------------------------------------------------------------- operations
    (
        "operations",
        "TASK_FAILED_RECENT",
        "warning",
        "Failed tasks",
        "Tasks that ended in error in the last task_window_hours (24 h), grouped by node and type.",
        "Read the newest failure's log (get_task).",
    ),
    (
        "operations",
        "CERT_EXPIRED",
        "critical",
        "Certificate expired",
        "notafter is in the past.",
        "Renew it (pvenode acme cert renew, or upload a new certificate).",
    ),
    (
        "operations",
        "CERT_EXPIRING",
        "warning",
        "Certificate expiring",
        "Expires within cert_warning_days (30); critical within cert_critical_days (7).",
        "Renew it.",
    ),
    (
        "operations",
        "REPO_ENTERPRISE_WITHOUT_SUBSCRIPTION",
        "warning",
        "Enterprise repository without subscription",
        "The pve-enterprise repository is enabled but the subscription is not active: apt update fails (401).",
        "Add a subscription or switch to the no-subscription repository.",
    ),
    (
        "operations",
        "REPO_NO_PVE_REPO",
        "warning",
        "No Proxmox VE repository enabled",
        "Neither enterprise nor no-subscription is enabled: no updates.",
        "Enable one of them.",
    ),
    (
        "operations",
        "REPO_TEST_ENABLED",
        "warning",
        "Test repository enabled",
        "The pvetest repository is enabled on a node.",
        "Disable it on production nodes.",
    ),
    (
        "operations",
        "REPO_NO_SUBSCRIPTION",
        "info",
        "No-subscription repository",
        "The no-subscription repository is in use (not recommended for production by Proxmox).",
        "Fine for test clusters; for production use a subscription and the enterprise repository.",
    ),
    (
        "operations",
        "UPDATES_PENDING",
        "info",
        "Updates pending",
        "APT reports upgradable packages (as of the last refresh).",
        "Plan a rolling update.",
    ),
    (
        "operations",
        "DISK_SMART_FAILED",
        "critical",
        "Disk failing SMART",
        "health is neither PASSED/OK nor UNKNOWN.",
        "Replace the disk.",
    ),
    (
        "operations",
        "DISK_WEAROUT_HIGH",
        "warning",
        "SSD wearing out",
        "Remaining life at or below wearout_warning_pct (30 %); critical at wearout_critical_pct (15 %).",
        "Plan the replacement.",
    ),
    (
        "operations",
        "ZFS_POOL_DEGRADED",
        "critical",
        "ZFS pool not healthy",
        "health is not ONLINE.",
        "zpool status -x on the node; replace the failed device.",
    ),
    # ---------------------------------------------------------------- ceph
    (
        "ceph",
        "CEPH_HEALTH_CHECK",
        "warning",
        "Ceph reports a health check",
        "An entry of health.checks in /cluster/ceph/status, explained (meaning, likely cause, next action). "
        "HEALTH_ERR checks are critical, HEALTH_WARN warnings, muted checks info.",
        "Follow the next action in the finding; `ceph health detail` names the daemons and PGs.",
    ),
    (
        "ceph",
        "CEPH_OSD_DOWN",
        "critical",
        "Ceph OSD down",
        "An OSD's status is down. Critical while it is still in (its data is degraded), warning once out.",
        "Check the OSD's daemon and disk on its host (systemctl status ceph-osd@<id>); start it or replace the disk.",
    ),
    (
        "ceph",
        "CEPH_OSD_OUT",
        "warning",
        "Ceph OSD up but out",
        "An OSD is up and out: CRUSH places no data on it, its capacity is unused.",
        "If it was taken out for maintenance and is healthy, mark it in (ceph osd in <id>).",
    ),
    (
        "ceph",
        "CEPH_OSD_LATENCY_HIGH",
        "warning",
        "Ceph OSD much slower than the others",
        "An up OSD's commit latency is at least 50 ms and five times the median OSD's: one slow disk slows "
        "every write to the PGs it holds.",
        "Check the disk's SMART state and wear; replace it or mark the OSD out.",
    ),
    (
        "ceph",
        "CEPH_POOL_NEAR_FULL",
        "warning",
        "Ceph pool nearly full",
        "A pool's percent_used (stored over stored plus MAX AVAIL) is at least 80 %; critical at 90 %.",
        "Add OSDs, delete data, or rebalance the fullest OSDs (MAX AVAIL follows the fullest OSD).",
    ),
    (
        "ceph",
        "CEPH_POOL_LOW_REDUNDANCY",
        "warning",
        "Ceph pool with too few replicas",
        "A replicated pool has size <= 2 or min_size = 1 (critical): one more failure loses data or accepts "
        "writes with a single copy.",
        "Set size 3 and min_size 2 (ceph osd pool set <pool> size 3; ... min_size 2) if capacity allows.",
    ),
    (
        "ceph",
        "CEPH_POOL_AUTOSCALE_WARN",
        "warning",
        "Ceph pool PG count differs from the autoscaler's",
        "pg_autoscale_mode is warn and pg_num differs from the autoscaler's pg_num_final.",
        "Set pg_autoscale_mode on, or set pg_num to the recommended value.",
    ),
    (
        "ceph",
        "CEPH_FLAG_SET",
        "warning",
        "Ceph OSD flag left set",
        "A cluster-wide OSD flag is set (noout, norebalance, ...); critical for pause, norecover, nodown, noup.",
        "If no maintenance is running, unset it (ceph osd unset <flag>, or the ceph_unset_flag operation).",
    ),
    (
        "ceph",
        "CEPH_MON_OUT_OF_QUORUM",
        "warning",
        "Ceph monitor out of quorum",
        "A monitor is not in quorum; critical when one more monitor failure would lose quorum.",
        "Bring the monitor back (systemctl status ceph-mon@<name> on its host).",
    ),
    (
        "ceph",
        "CEPH_VERSION_MIXED",
        "warning",
        "Ceph daemons on different versions",
        "Ceph metadata shows more than one ceph_version_short across monitors, managers and OSDs.",
        "Finish the upgrade: restart the daemons still on the older version.",
    ),
    (
        "ceph",
        "CEPH_NODE_LOSS_NEARFULL",
        "warning",
        "Losing one node would fill Ceph",
        "Raw use over the in OSDs' capacity without the largest host's would reach nearfull (85 %); critical at 95 %.",
        "Add capacity before maintenance or a failure forces re-replication onto the remaining OSDs.",
    ),
    (
        "ceph",
        "CEPH_OSD_NOT_OK_TO_STOP",
        "critical",
        "Ceph OSD not ok to stop",
        "Evacuation: PVE's cmd-safety (Ceph's ok-to-stop) says stopping an OSD on the node would leave PGs below "
        "min_size; taking the node down would stop I/O to them across the cluster. The plan is blocked.",
        "Bring the cluster's down OSDs back and let recovery finish (ceph -s: active+clean) before the maintenance.",
    ),
    (
        "ceph",
        "CEPH_MON_QUORUM_AT_RISK",
        "critical",
        "Stopping the node's Ceph monitor would lose quorum",
        "Evacuation: cmd-safety (ceph mon ok-to-stop) says the other monitors would not keep a quorum; Ceph would "
        "stop serving I/O. The plan is blocked.",
        "Bring the down monitors back (or add one on another node) before the maintenance.",
    ),
]

AREAS.extend(["data", "cluster", "ha", "backups", "migration", "capacity", "replication", "guests", "operations"])
AREAS.append("ceph")
for _area, _code, _sev, _title, _rule, _remedy in _TABLE:
    register_code(_area, CodeInfo(_code, _area, _sev, _title, _rule, _remedy))


def render_codes() -> str:
    load_checks()
    lines = [
        "# Finding codes",
        "",
        "Stable codes: they never change meaning and are never reused. Severity is the default; the rule "
        "says when a finding escalates. Thresholds in parentheses are defaults, overridable with "
        "`--thresholds name=value,...`.",
        "",
    ]
    for area in AREAS:
        lines += [f"## {area}", "", "| code | severity | meaning | rule |", "|---|---|---|---|"]
        for info in CODES.values():
            if info.area == area:
                lines.append(f"| `{info.code}` | {info.severity} | {info.title} | {info.rule} |")
        lines.append("")
    return "\n".join(lines).rstrip()
