"""How many examples a property test draws: the full count in CI (`DAGC_PROPERTIES=full`, set by .ci/run),
a third of it (at least 10) by default, so that a developer's run of the suite stays quick."""

from __future__ import annotations

import os

__all__ = ["FULL", "examples"]

FULL = os.environ.get("DAGC_PROPERTIES", "fast") == "full"


def examples(n: int) -> int:
    """`n` in the full profile, else a third of it (at least 10, at most `n`)."""
    return n if FULL else min(n, max(10, n // 3))
