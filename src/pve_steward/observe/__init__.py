"""Instrumentation, used from every layer: Prometheus metrics and their instruments, OpenTelemetry traces."""
