"""`verify`: check the IR's structural invariants (see dagc.ir.verifier)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagc.diagnostics import CompileError
from dagc.ir.core import Graph
from dagc.passes.base import Pass, PassContext, register


@register
@dataclass(frozen=True)
class Verify(Pass):
    """Pre: any graph. Post: unchanged; raises CompileError listing every violated invariant."""

    name: ClassVar[str] = "verify"

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        from dagc.ir.verifier import verify

        problems = [d for d in verify(graph) if d.is_error]
        if problems:
            raise CompileError(problems)
