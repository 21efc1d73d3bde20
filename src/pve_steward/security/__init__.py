"""Security layer: tiers, the @guarded wrapper, confirmation tokens and the audit log."""
