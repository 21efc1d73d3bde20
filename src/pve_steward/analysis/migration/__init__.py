"""Migratability: can this guest move to that node, how (live / offline / restart), and if not, why.

The steps an operator would name, one module each, each following the PVE code it mirrors:
``targets`` (which nodes at all), ``devices`` and ``volumes`` (the per-guest verdict from the
config and the storage config), ``target_rules`` (what each node must offer), ``pvecheck`` (PVE's
own precondition as a cross-check), ``verdict`` (the procedure and the mode) and ``findings``
(the health check's view). ``docs/rules.md`` lists every rule and the PVE function behind it.
"""
