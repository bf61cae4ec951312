"""Extracting a pipeline's task graph by symbolic interpretation of its body.

The body is walked statement by statement. Names are bound to symbolic values: a run-time value
(an IR operand referring to task outputs or parameters), a compile-time constant, or a callable
(task, pipeline, module). Task calls become IR nodes; nested pipeline calls are inlined with
hierarchical names. Nothing is executed.

Control flow:
  * `for` loops and comprehensions over compile-time iterables are unrolled; nodes made in
    iteration k get the suffix `[k]` (`train[3]`, `shard[2].tokenize`).
  * `if` on a compile-time value is folded; `if` on a task result becomes a `cond` region node.
  * a `for` loop over a compile-time iterable that leaves early (`if <task result>: break`)
    becomes a `loop` region node whose trip count is at most the iterable's length.
  * arithmetic, comparisons, indexing, attribute access and f-strings on task results become
    `glue` nodes.
  * `while` with a bounded trip count, `try`/`finally` and a `for` over a run-time list (a `map`) become
    `loop`, `try` and `map` region nodes.
A region node owns its bodies (`Node.bodies`, see dagc.ir.core and docs/ir.md).

One module a job, all sharing one `Context` (the graph being built and what the walk has learnt):

  values       the symbolic values (Dyn, Static, ...) and the signals the walk raises
  queries      pure questions about AST and IR fragments
  messages     names and hints of the constructs a pipeline body does not support
  context      the shared state, node naming, and the `Component` base of the jobs below
  core         the entry point, statements, assignment, pipeline inlining
  loops        unrolled loops, `while`, and `loop` regions
  regions      `cond` and `try` regions and what a region captures
  maps         `map` regions (a `for` over a run-time list)
  expressions  expressions, names, compile-time values
  glue         `glue` nodes for operations on run-time values
  calls        calls: tasks, pipelines, classes, configs, argument binding
  state        effects, shared state and the diagnostics about them

A job reaches another through the context (`self.cx.loops.for_loop(...)`), so no job imports another:
the walk is recursive (an expression may inline a pipeline whose body has loops of expressions), and
that recursion runs through the context instead of through import cycles.
"""

from __future__ import annotations

from typing import Any

from dagc.diagnostics import DiagnosticSink
from dagc.frontend.extract.calls import Calls
from dagc.frontend.extract.context import MAX_REGION_DEPTH, MAX_UNROLL, MAX_WHILE, Context
from dagc.frontend.extract.core import Interpreter
from dagc.frontend.extract.expressions import Expressions
from dagc.frontend.extract.glue import Glue
from dagc.frontend.extract.loops import Loops
from dagc.frontend.extract.maps import Maps
from dagc.frontend.extract.regions import Regions
from dagc.frontend.extract.state import StateChecks
from dagc.frontend.modules import PipelineDef, Project
from dagc.ir.core import Graph

__all__ = ["extract_pipeline", "MAX_UNROLL", "MAX_WHILE", "MAX_REGION_DEPTH"]


def extract_pipeline(project: Project, pipeline: PipelineDef, sink: DiagnosticSink,
                     overrides: dict[str, Any] | None = None) -> Graph:
    cx = Context(project, sink)
    cx.core, cx.loops, cx.regions, cx.maps = Interpreter(cx), Loops(cx), Regions(cx), Maps(cx)
    cx.exprs, cx.glue, cx.calls, cx.state = Expressions(cx), Glue(cx), Calls(cx), StateChecks(cx)
    return cx.core.extract(pipeline, overrides or {})
