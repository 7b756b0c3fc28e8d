"""Implementations of the ports in dormant.ports."""
