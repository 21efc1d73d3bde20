"""The diagnostics process: heavy diagnostics and plans run in a process of their own (issue 17).

Beside fifty health checks, a cheap call (``get_guest``) waited for the one interpreter lock those
checks held in turn (decoding PVE's answers, analysing, cutting pages): 8-28x its idle latency at
p99. Threads cannot fix that. So with ``--diagnostics-process`` over HTTP (many callers), the operations marked
``@heavy`` run in a child process with its own clients, read cache, single-flight and admission
budget; the front end keeps the MCP transport, the guard and audit, the cheap calls, and hands each
heavy call over (``link.py``) as its operation name and arguments. The child (``child.py``) answers
with the caller's page of the result, the same object the handler returns in-process.

Design record 261204-34 says what this trades (two read caches, a pool per process).
"""
