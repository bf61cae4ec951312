"""Deadlines that grow with the machine's load: a wait that is generous on an idle machine stays generous on one
that runs other work (a CI host, a parallel build), instead of failing a test that is only slow."""

from __future__ import annotations

import os

__all__ = ["scaled"]


def scaled(seconds: float) -> float:
    """`seconds` times how oversubscribed the CPUs are now (the 1-minute load average per core, at least 1)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return seconds
    return seconds * max(1.0, load / (os.cpu_count() or 1))
