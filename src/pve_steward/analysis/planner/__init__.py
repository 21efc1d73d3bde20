"""Planning: node evacuation and single-guest moves, in the steps an operator would name.

``evacuation`` (the procedure), ``placement`` (capacity, shared with N+1 through
``analysis.capacity.node_room``), ``handoff`` (what HA maintenance moves or leaves behind),
``guest_move`` (one guest) and ``models`` (the answers).
"""
