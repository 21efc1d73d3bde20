"""Planning: node evacuation and single-guest moves, in the steps an operator would name.

``evacuation`` (the procedure), ``placement`` (capacity, shared with N+1 through
``analysis.capacity.node_room``), ``handoff`` (what HA maintenance moves or leaves behind),
``guest_move`` (one guest) and ``models`` (the answers).
"""

from __future__ import annotations

from pve_steward.analysis.migration.ha_rules import ha_allowed_nodes, ha_blocked_nodes
from pve_steward.analysis.planner.evacuation import plan_evacuation
from pve_steward.analysis.planner.guest_move import plan_guest_move
from pve_steward.analysis.planner.models import EvacuationPlan, GuestMove

__all__ = ["EvacuationPlan", "GuestMove", "ha_allowed_nodes", "ha_blocked_nodes", "plan_evacuation", "plan_guest_move"]
