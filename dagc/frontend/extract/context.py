"""What the jobs of the extraction share: the graph being built, what the walk has learnt so far, and node naming.

Each job (`core`, `loops`, ...) is a `Component` holding the `Context`; it reaches the others through it
(`self.cx.exprs.eval(...)`). The context imports none of them at run time, so the package has no import cycles.
"""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING, Any

from dagc.diagnostics import DiagnosticSink
from dagc.frontend.effects import EffectAnalyzer
from dagc.frontend.extract.values import POISON, Dyn, ExtractError, Value, known_container
from dagc.frontend.modules import ModuleInfo, PipelineDef, Project
from dagc.ir.core import Graph, Node
from dagc.ir.location import SourceSpan
from dagc.ir.types import Operand, Ref

if TYPE_CHECKING:
    from dagc.frontend.extract.calls import Calls
    from dagc.frontend.extract.core import Interpreter
    from dagc.frontend.extract.expressions import Expressions
    from dagc.frontend.extract.glue import Glue
    from dagc.frontend.extract.loops import Loops
    from dagc.frontend.extract.maps import Maps
    from dagc.frontend.extract.regions import Regions
    from dagc.frontend.extract.state import StateChecks

MAX_UNROLL = 2_000_000  # loop iterations unrolled per pipeline, all loops together
MAX_WHILE = 100_000  # iterations of one `while` loop on a compile-time condition
MAX_REGION_DEPTH = 12  # regions inside regions (emitted programs nest one block per level)


class Context:
    """One pipeline's extraction: the graph, the walk's state, and the jobs (set by `extract_pipeline`)."""

    core: Interpreter
    loops: Loops
    regions: Regions
    maps: Maps
    exprs: Expressions
    glue: Glue
    calls: Calls
    state: StateChecks

    def __init__(self, project: Project, sink: DiagnosticSink) -> None:
        self.project = project
        self.sink = sink
        self.graph: Graph | None = None
        self.name_counts: dict[str, int] = {}
        self.used: set[str] = set()
        self.stack: list[PipelineDef] = []
        self.nodes_by_task: dict[str, list[str]] = {}
        self.blocks: list[list[Node]] = []  # open region bodies, innermost last
        self.owner: dict[str, str] = {}  # node inside a closed region -> the region node
        self.producer: dict[str, str] = {}  # value -> node that produces it
        # values known to be lists or dicts at run time although their length is not known at compile time: one
        # carried through a loop that exits early, and what growing one gives (`xs.append(v)` goes on working)
        self.runtime_kinds: dict[str, str] = {}
        self.types: dict[str, tuple[str, SourceSpan | None]] = {}  # value -> (declared type, where)
        self.writers: dict[str, tuple[str, SourceSpan]] = {}
        self.reads: list[tuple[str, str, SourceSpan]] = []
        self.readers: dict[str, list[str]] = {}  # path -> tasks that read its current version
        self.extra_deps: list[str] = []
        self.extra_deps_for_all = False  # `dagc.after(pipeline(...), t)`: every task of the pipeline's body waits
        self.budget = MAX_UNROLL
        self.budget_reported = False
        self.factor = 1  # product of the lengths of the loops being unrolled
        self.shapes: dict[int, tuple[Any, ...]] = {}  # per task signature: binding tables
        self.return_spans: dict[int, SourceSpan | None] = {}
        self.modules_used: set[str] = set()
        self.analyzer = EffectAnalyzer(project)
        self.bound_exprs: dict[str, ast.expr] = {}  # parameter -> argument expression, of the last bind
        # a run-time container (operand id) -> (the operand, kept alive; the compile-time lists and dicts
        # copied into it): a task changing one of those would leave the container's copy unchanged
        self.captured: dict[int, tuple[Operand, set[int]]] = {}
        # module-level constants the pipeline reads (folded at compile time): `module.NAME` -> first read;
        # and the lists and dicts inside them (id -> (`module.NAME`, the value, kept alive))
        self.module_reads: dict[str, tuple[ast.AST, ModuleInfo]] = {}
        # module-level objects the pipeline body reads (`module:NAME` -> the node that reads it)
        self.module_objects_read: dict[str, str] = {}
        # plain functions of the user's called in the pipeline body, as tasks with default options (by id)
        self.helper_tasks: dict[int, Any] = {}
        # a task with the options one call gives it (`train.options(retries=3)(x)`), one object per task and
        # options for the whole compile: effect summaries are kept by the task object's id
        self.configured_tasks: dict[tuple[int, Any, tuple[str, ...]], Any] = {}
        # a pipeline's body (by id, kept) -> that body with its returns lifted (extract/returns.py)
        self.lifted_bodies: dict[int, tuple[list[ast.stmt], list[ast.stmt]]] = {}
        self.module_objects: dict[int, tuple[str, Any]] = {}
        self.last_task: Node | None = None  # node of the task call evaluated last
        self.effect_warned: set[tuple[int, str]] = set()
        # compile-time iterators a loop has used up (by id; the value kept so that its id stays its own)
        self.used_iterators: dict[int, Any] = {}
        self.bound_args: dict[str, dict[str, Operand]] = {}  # node -> its arguments by parameter
        self.global_writes: dict[str, tuple[str, SourceSpan]] = {}  # module-level name -> first change seen
        # node -> (parameter, why, where) of each argument it may change in place (for DAGC159)
        self.mutators: dict[str, list[tuple[str, str, SourceSpan]]] = {}
        # node -> (why, where) of a file it writes at a path the call does not name (for DAGC164)
        self.unnamed_writes: dict[str, tuple[str, SourceSpan]] = {}
        self.pipeline_seeds = False  # a task called so far seeds the global generator
        self.folded: dict[tuple[str, str], None] = {}  # module constants folded into the graph (ordered set)
        self.configs: dict[int, tuple[Any, Value]] = {}  # id(config instance) -> (instance, its node's value)
        self.config_nodes: dict[str, Any] = {}  # node building a config -> the instance
        self.module_configs: set[int] = set()  # ids of module-level constants (configs among them)
        self.task_summaries: dict[int, tuple[Any, Any, list[str], list[tuple[str, bool]]]] = {}
        self.typed_summaries: dict[tuple[int, frozenset[tuple[str, str]]], Any] = {}  # per types passed
        # value -> the class a task without a return annotation returns (`return DataLoader(...)`)
        self.returned: dict[str, str] = {}
        self.returned_by_task: dict[tuple[int, int], tuple[str | None, ...]] = {}
        self.observed: dict[str, Any] | None = None  # task -> what earlier runs saw it do (frontend.observed)

    def module_used(self, module: str) -> bool:
        assert self.graph is not None
        return module == self.graph.module or module in self.modules_used

    def runtime_kind(self, value: Value | None) -> str | None:
        if isinstance(value, Dyn) and isinstance(value.operand, Ref):
            return self.runtime_kinds.get(value.operand.name)
        return None

    def container_kind(self, value: Value | None) -> str | None:
        """"list" or "dict" for one built in the pipeline, of known length or known only at run time."""
        if value is None or value is POISON:
            return None
        known = known_container(value)
        if known is not None:
            return known[0] if known[0] in ("list", "dict") else None
        return self.runtime_kind(value)

    def spend(self, span: SourceSpan) -> bool:
        self.budget -= 1
        if self.budget >= 0:
            return True
        if not self.budget_reported:
            self.budget_reported = True
            self.sink.error("DAGC119", f"loops unroll to more than {MAX_UNROLL} iterations", span,
                            hint="use fewer iterations, or move the loop inside a task")
        return False

    def check_depth(self, span: SourceSpan) -> None:
        if len(self.blocks) >= MAX_REGION_DEPTH:
            self.sink.error("DAGC117", f"branches and loops on task results are nested more than "
                            f"{MAX_REGION_DEPTH} deep", span,
                            hint="move the innermost logic into a task, or combine conditions with `and`")
            raise ExtractError

    def reserve(self, name: str) -> str:
        base, count = name, 0
        while name in self.used:
            count += 1
            name = f"{base}.{count}"
        self.used.add(name)
        return name

    def node_name(self, base: str) -> str:
        count = self.name_counts.get(base, 0)
        name = base if count == 0 else f"{base}.{count}"
        while name in self.used:
            count += 1
            name = f"{base}.{count}"
        self.name_counts[base] = count + 1
        self.used.add(name)
        return name

    def add_node(self, node: Node) -> None:
        self.used.update(node.outputs)
        for value in node.outputs:
            self.producer.setdefault(value, node.name)
        if self.blocks:
            self.blocks[-1].append(node)
        else:
            assert self.graph is not None
            self.graph.add_node(node)

    def written_as(self, path: str) -> str | None:
        """The written path that covers `path`: itself, or a directory above it (`writes=["{out_dir}"]` covers
        the files in it); None when no task writes it."""
        while path not in self.writers:
            parent = os.path.dirname(path)
            if not parent or parent == path:
                return None
            path = parent
        return path

    def visible(self, node_name: str) -> str:
        while node_name in self.owner:
            node_name = self.owner[node_name]
        return node_name

    def take_extra_deps(self) -> list[str]:
        deps = self.extra_deps
        if not self.extra_deps_for_all:
            self.extra_deps = []
        return list(deps)


class Component:
    """One job of the extraction; reaches the graph, the state and the other jobs through `cx`."""

    def __init__(self, cx: Context) -> None:
        self.cx = cx
