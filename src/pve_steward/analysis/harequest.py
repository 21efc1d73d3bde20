"""What the HA manager's API refuses for a service, whoever asks: ha_set_state, and the power actions PVE hands
to it for an HA-managed guest (start -> 'set --state started', stop and shutdown -> 'crm-command stop')."""

from __future__ import annotations

from pve_steward.analysis.pverules import pve_rule


@pve_rule(
    "ha.error-state-requests",
    rule="A service in the HA error state takes no request but its state set to 'disabled' (a start, a stop, a "
    "migration or a state change fails: 'must be disabled and fixed first').",
    pve="pve-ha-manager src/PVE/API2/HA/Resources.pm check_service_state (update, migrate, relocate); "
    "src/PVE/CLI/ha_manager.pm stop",
)
def error_state_refusal(sid: str, crm_state: str, wanted: str | None) -> str | None:
    """Why PVE refuses the request (``wanted``: the requested state, None for a stop or move); None if it takes it."""
    if crm_state == "error" and wanted != "disabled":
        return (
            f"{sid} is in the HA error state: PVE takes only 'disabled' until it is fixed "
            "(service in error state, must be disabled and fixed first)"
        )
    return None
