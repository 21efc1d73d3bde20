"""Transports and operations.

Streamable HTTP and its port binding, the server's lifespan and readiness, the `check` command and
its exit codes, and the diagnostics process (worker/).
"""
