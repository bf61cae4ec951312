"""Fingerprints: the keys stored outputs are found by. A task's fingerprint is computed before it runs,
from what determines its output: its target, its constant arguments and the fingerprints of the values it
reads. Equal fingerprints mean "the same computation", so a resumed run reuses every output whose file
exists and recomputes the rest."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

_FP_TAG = "dagc-fingerprint-1"


def fingerprint(target: str, constants: object = None, inputs: Iterable[str] = ()) -> str:
    """Fingerprint of a task: a hash of its target (`module:function`), its constant arguments
    (any value with a deterministic `repr`: IR literals, or the JSON text of its operands) and the
    fingerprints of the values it reads, in order. 32 hex digits."""
    text = repr((_FP_TAG, target, constants, tuple(inputs)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def value_fingerprint(name: str, value: object) -> str:
    """Fingerprint of a pipeline parameter `name` bound to the literal `value`."""
    return fingerprint(f"param:{name}", value)


def output_fingerprint(task_fingerprint: str, index: int = 0) -> str:
    """Fingerprint of a task's `index`-th output, as its consumers see it."""
    return f"{task_fingerprint}:{index}"
