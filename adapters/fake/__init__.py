"""Deterministic fake transports, a fake clock and a step-by-step driver."""
