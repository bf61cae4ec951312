"""Backends: IR → runnable programs (local, Ray, torch.distributed) and pictures (graphviz)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line reads BACKENDS' names at start-up: no IR import for that
    from dagc.ir.core import Graph

__all__ = ["BACKENDS", "emit"]


def _local(graph: Graph, out: Path | None) -> str:
    from dagc.backends.local import emit_local

    return emit_local(graph, out)


def _torch(graph: Graph, out: Path | None) -> str:
    from dagc.backends.torch import emit_torch

    return emit_torch(graph, out)


BACKENDS: dict[str, Callable[[Graph, Path | None], str]] = {"local": _local}
BACKENDS["torch"] = _torch


def _ray(graph: Graph, out: Path | None) -> str:
    from dagc.backends.ray import emit_ray

    return emit_ray(graph, out)


BACKENDS["ray"] = _ray


def emit(graph: Graph, backend: str, out: Path | None = None) -> str:
    """Source text of the program `backend` emits for `graph` (to be written at `out`, if known)."""
    try:
        emitter = BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}") from None
    return emitter(graph, out)
