"""The exit codes of `check` (monitoring-plugin convention) and of a usage error, apart from checkcmd.py so
the CLI's start does not import the report models (issue 17)."""

EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN = 0, 1, 2, 3
EXIT_USAGE = 64  # BSD sysexits EX_USAGE: far from the monitoring-plugin range 0..3

__all__ = ["EXIT_CRITICAL", "EXIT_OK", "EXIT_UNKNOWN", "EXIT_USAGE", "EXIT_WARNING"]
