"""Pure diagnostics and planning: API payloads (and an injected now) in, typed reports out. No I/O."""
