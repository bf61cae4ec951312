"""Metaflow flows: a class deriving from `metaflow.FlowSpec` whose steps are `@step` methods.

Each step becomes a task (`Flow.step`, marked with the dialect); the order of the steps comes from their
`self.next(...)` transitions (dagc.frontend.dialects.metaflow_graph), which become the body of a pipeline named
after the class: its parameters are the flow's `Parameter`s. At run time (dagc.runtime.dialects.metaflow) a
task takes the artifacts its step's predecessors left and returns the artifacts the step leaves.

A flow class may derive from flow classes of its own file or of the user's modules: its steps, parameters and
Configs are those Python finds on it (its method resolution order), and each step's task is called on the derived
class (`TaskDef.bases`). A Config is no pipeline parameter: the start step reads it, as Metaflow's run does.

Step decorators map to task options: `@retry(times=)` to retries, `@timeout(seconds=, minutes=, hours=)` to
timeout, `@resources(cpu=, gpu=, memory=)` to cpus, gpus and memory (Metaflow's megabytes); `@catch(var=)` is
run by the runtime (which then also makes the step's retries, so that only the last failure is caught);
`@parallel` marks the step that `self.next(..., num_parallel=N)` runs as N tasks.
"""

from __future__ import annotations

import ast
import copy
import weakref
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from dagc.diagnostics import Severity
from dagc.frontend.dialects import CLASS_BASES, dotted_name, user_symbol
from dagc.frontend.fix_edits import bare_decorator_fix
from dagc.frontend.modules import (
    ClassSteps,
    FunctionSig,
    ModuleInfo,
    Opaque,
    Param,
    PipelineDef,
    Project,
    TaskDef,
)
from dagc.frontend.source import name_span
from dagc.frontend.static import NotStatic, is_literal_value
from dagc.ir.types import TaskOptions

__all__ = ["FlowStep", "FlowParameter", "scan_flow", "DIALECT"]

DIALECT = "metaflow"
for _base in ("metaflow.FlowSpec", "metaflow.flowspec.FlowSpec"):
    CLASS_BASES[_base] = DIALECT

_STEP = ("metaflow.step", "metaflow.decorators.step")
_PARAMETERS = {"metaflow.Parameter": "parameter", "metaflow.parameters.Parameter": "parameter",
               "metaflow.IncludeFile": "file", "metaflow.includefile.IncludeFile": "file",
               # read by the start step, from its file (relative to the working directory) or its default_value
               "metaflow.Config": "config", "metaflow.user_configs.config_parameters.Config": "config"}
_CONFIG_EXPR = ("metaflow.config_expr", "metaflow.user_configs.config_parameters.config_expr")
_SUPPORTED = {"retry", "resources", "catch", "timeout", "parallel"}
PARALLEL = "_parallel_ubf_iter"  # what Metaflow's `self.next(..., num_parallel=N)` makes a foreach over
_IGNORED = {"card": "a card is a report of the step for Metaflow's UI; dagc runs the step without it",
            "project": "a project names Metaflow's deployments; dagc runs the flow without it",
            "schedule": "a schedule starts deployed flows; dagc runs the flow when asked",
            "trigger": "a trigger starts deployed flows; dagc runs the flow when asked"}
SUPPORTED_HINT = "dagc runs @step methods with @retry, @resources, @catch, @timeout and @parallel"
MEGABYTE = 2**20  # Metaflow gives memory in megabytes


@dataclass
class FlowParameter:
    """A class attribute `name = Parameter("name", default=...)` (or IncludeFile): a pipeline parameter."""

    attr: str
    node: ast.Assign
    default: ast.expr  # the literal default, or `None`: the flow's own default, read at run time
    kind: str  # "parameter" | "file" | "config" (a Config: no pipeline parameter; the start step reads it)


@dataclass
class FlowStep:
    """A `@step` method and its transition (the tail `self.next(...)`)."""

    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    join: bool = False  # `def join(self, inputs)`: takes the artifacts of several steps
    transition: str = "end"  # "linear" | "split" | "foreach" | "switch" | "end"
    targets: tuple[str, ...] = ()  # (a switch: one per case, in the order of `cases`)
    foreach: str | None = None
    cases: tuple[Any, ...] = ()  # a switch's case values, `self.next({"a": self.a, ...}, condition="attr")`
    next_call: ast.Call | None = None
    options: TaskOptions = field(default_factory=TaskOptions)
    home: ModuleInfo | None = None  # the module defining it, when a base class of another module does
    parallel: bool = False  # @parallel: one of the N tasks of `self.next(self.it, num_parallel=N)`


@dataclass(eq=False)  # (one object per class: compared and hashed by identity)
class FlowClass:
    """A FlowSpec class as declared: its own steps and parameters, and the user flow classes it derives from."""

    name: str
    info: ModuleInfo
    node: ast.ClassDef
    steps: dict[str, FlowStep]  # its own @step methods (their transitions are read per flow that runs them)
    parameters: list[FlowParameter]
    hidden: set[str]  # its other attributes and methods: they hide a base's step or parameter of that name
    bases: list[FlowClass]

    @property
    def target(self) -> str:
        return f"{self.info.name}:{self.name}"

    def mro(self) -> list[FlowClass]:
        """The user flow classes in Python's method resolution order (C3), this one first; [] if it has none."""
        pending = [base.mro() for base in self.bases] + [list(self.bases)]
        if any(not chain for chain in pending[:-1]):
            return []
        order: list[FlowClass] = [self]
        while any(pending):
            pending = [chain for chain in pending if chain]
            head = next((chain[0] for chain in pending if not any(chain[0] in other[1:] for other in pending)), None)
            if head is None:
                return []
            order.append(head)
            pending = [chain[1:] if chain[0] is head else chain for chain in pending]
        return order


@dataclass
class FlowMembers(ClassSteps):
    """A flow class's members, and the class as declared (for the flows that derive from it)."""

    flow: FlowClass | None = None
    dialect: str = DIALECT  # (dagc.frontend.dialects.scan_dialect_class finds derived flows by it)


def scan_flow(project: Project, info: ModuleInfo, node: ast.ClassDef) -> Opaque:
    """The flow class `node`: its steps (its own and those it inherits, resolved as Python does) as tasks, and a
    pipeline (named after the class) that runs them. A class that another flow class of its module derives
    from, or one in a module the script imports, is only read: Metaflow runs the flow the script runs."""
    from dagc.frontend.dialects.metaflow_graph import read_transition, synthesize_pipeline

    reported = len(project.sink.diagnostics)
    _check_class_decorators(project, info, node)
    flow = FlowClass(node.name, info, node, {}, [], set(), _flow_bases(project, info, node))
    members = FlowMembers(node.name, info.name, flow=flow)
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            found = _parameter(project, info, stmt)
            if found is not None:
                flow.parameters.append(found)
                continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_is_step(info, d) for d in stmt.decorator_list):
                # (the Configs a decorator can read: those the class body binds before it, as Python runs it)
                configs = {p.attr for p in flow.parameters if p.kind == "config"}
                flow.steps[stmt.name] = FlowStep(stmt.name, stmt, join=len(stmt.args.args) > 1,
                                                 options=_step_options(project, info, stmt, configs),
                                                 parallel=any(_decorator_name(info, d) == "parallel"
                                                              for d in stmt.decorator_list))
                continue
            members.methods.add(stmt.name)
        flow.hidden.update(_bound_names(stmt))
    if info.name != project.entry_module or _derived_in_module(info, node):
        return Opaque("class", node, members)
    order = flow.mro()
    if not order:
        project.sink.error("DAGC117", f"the base classes of flow `{node.name}` have no consistent order",
                           name_span(info.source, node), hint="list each base class after the classes deriving "
                           "from it, as Python's method resolution order requires")
        order = list(dict.fromkeys([flow, *(c for b in flow.bases for c in b.mro() or [b])]))  # (to go on)
    steps, parameters = _resolve(order)
    for step in steps.values():
        read_transition(project, info, step, steps)
    bases = tuple(dict.fromkeys(c.target for c in order[1:]))
    for step in steps.values():
        home = step.home or info
        task = TaskDef(step.name, info.name, f"{node.name}.{step.name}", _signature(step, parameters), step.options,
                       None, step.node, home.source, (), dialect=DIALECT,
                       home=home.name if step.home is not None else None, bases=bases)
        members.members[step.name] = task
        info.tasks[task.qualname] = task
    failed = any(d.severity is Severity.ERROR for d in project.sink.diagnostics[reported:])
    body = synthesize_pipeline(project, info, node, steps, parameters, failed)
    info.pipelines[node.name] = PipelineDef(node.name, info.name, FunctionSig.of(body), body, info.source,
                                            weakref.ref(info), dialect=DIALECT)
    return Opaque("class", node, members)


def _resolve(order: list[FlowClass]) -> tuple[dict[str, FlowStep], list[FlowParameter]]:
    """The flow's steps and parameters as Python finds them on the class: each name from the first class of the
    resolution order that binds it (a step is a fresh FlowStep: its transition is read for this flow)."""
    steps: dict[str, FlowStep] = {}
    parameters: dict[str, FlowParameter] = {}
    flow = order[0]
    for cls in reversed(order):
        for name in cls.hidden:
            steps.pop(name, None)
            parameters.pop(name, None)
        for parameter in cls.parameters:
            steps.pop(parameter.attr, None)
            parameters[parameter.attr] = parameter if cls.info is flow.info else _moved(parameter, flow.node)
        for name, step in cls.steps.items():
            parameters.pop(name, None)
            steps[name] = FlowStep(name, step.node, join=step.join, options=step.options, parallel=step.parallel,
                                   home=cls.info if cls.info is not flow.info else None)
    return steps, [p for p in parameters.values() if p.kind != "config"]


def _moved(parameter: FlowParameter, where: ast.ClassDef) -> FlowParameter:
    """A parameter a class of another module declares, placed at the flow class (the pipeline's file)."""
    assign, default = copy.deepcopy(parameter.node), copy.deepcopy(parameter.default)
    for tree in (assign, default):
        for node in ast.walk(tree):
            if "lineno" in node._attributes:
                node.lineno, node.col_offset = where.lineno, where.col_offset  # type: ignore[attr-defined]
                node.end_lineno, node.end_col_offset = where.lineno, where.col_offset + 5  # type: ignore[attr-defined]
    return FlowParameter(parameter.attr, assign, default, parameter.kind)


def _flow_bases(project: Project, info: ModuleInfo, node: ast.ClassDef) -> list[FlowClass]:
    """The user flow classes `node` derives from (in this module or imported from the user's own)."""
    found: list[FlowClass] = []
    for base in node.bases:
        members = user_flow_members(project, info, base)
        if members is not None and members.flow is not None:
            found.append(members.flow)
    return found


def user_flow_members(project: Project, info: ModuleInfo, expr: ast.expr) -> FlowMembers | None:
    """The members of the user flow class `expr` names (`Base`, `flows.Base`), or None."""
    symbol = user_symbol(project, info, expr)
    steps = symbol.steps if isinstance(symbol, Opaque) else None
    return steps if isinstance(steps, FlowMembers) else None


def _derived_in_module(info: ModuleInfo, node: ast.ClassDef) -> bool:
    """Whether another class of the module names `node` among its bases (then `node` is a base, not the flow)."""
    return any(isinstance(s, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == node.name for b in s.bases)
               for s in info.source.tree.body)


def _bound_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
        if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _is_step(info: ModuleInfo, decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return dotted_name(info, target) in _STEP


def _decorator_name(info: ModuleInfo, decorator: ast.expr) -> str | None:
    """`retry` for `@retry(times=2)` or `@metaflow.retry`, when the name comes from metaflow; else None."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = dotted_name(info, target)
    if name is None or not name.startswith("metaflow."):
        return None
    return name.rpartition(".")[2]


def _check_class_decorators(project: Project, info: ModuleInfo, node: ast.ClassDef) -> None:
    for decorator in node.decorator_list:
        name = _decorator_name(info, decorator)
        if name in _IGNORED:
            project.sink.warning("DAGC124", f"flow decorator @{name} is ignored by dagc", info.source.span(decorator),
                                 hint=_IGNORED[name])
        else:
            project.sink.error("DAGC124", f"flow decorator @{ast.unparse(decorator)} is not supported by dagc",
                               info.source.span(decorator),
                               hint="remove it to compile the flow with dagc (flow-level decorators such as @conda_base "
                               "or @pypi_base change where steps run); " + SUPPORTED_HINT)


def _parameter(project: Project, info: ModuleInfo, stmt: ast.Assign) -> FlowParameter | None:
    """`name = Parameter(...)`, `IncludeFile(...)` or `Config(...)` (reported when malformed)."""
    assert isinstance(stmt.value, ast.Call)
    kind = _PARAMETERS.get(dotted_name(info, stmt.value.func) or "")
    if kind is None:
        return None
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        project.sink.error("DAGC124", f"a {'Config' if kind == 'config' else 'Parameter'} is assigned to one "
                           "class attribute", info.source.span(stmt),
                           hint='write `alpha = Parameter("alpha", default=0.01)`')
        return None
    attr = stmt.targets[0].id
    default: ast.expr = ast.copy_location(ast.Constant(None), stmt.value)
    for kw in stmt.value.keywords:
        if kw.arg == "default" and kind == "parameter" and _literal(project, info, kw.value):
            default = kw.value
    return FlowParameter(attr, stmt, default, kind)


def _literal(project: Project, info: ModuleInfo, expr: ast.expr) -> bool:
    from dagc.frontend.modules import static_value

    try:
        return is_literal_value(static_value(expr, info, project))
    except (NotStatic, RecursionError):
        return False


_KINDS = {"times": int, "minutes_between_retries": (int, float), "seconds": (int, float), "minutes": (int, float),
          "hours": (int, float), "cpu": (int, float), "gpu": (int, float), "memory": (int, float), "disk": (int, float),
          "shared_memory": (int, float), "var": str, "print_exception": bool}
_OPTIONS_OF = {"retry": ("times", "minutes_between_retries"), "timeout": ("seconds", "minutes", "hours"),
               "resources": ("cpu", "gpu", "memory", "disk", "shared_memory"), "catch": ("var", "print_exception"),
               "parallel": ()}


def _option(project: Project, info: ModuleInfo, decorator: str, key: str, expr: ast.expr,
            configs: AbstractSet[str] = frozenset()) -> Any:
    """The compile-time value of `key=expr` in a step decorator, or None (reported) when it has none."""
    from dagc.frontend.modules import static_value

    expected = _KINDS.get(key)
    if expected is None or key not in _OPTIONS_OF[decorator]:
        project.sink.error("DAGC120", f"@{decorator} has no option `{key}` dagc reads", info.source.span(expr),
                           hint=f"options of @{decorator}: " + ", ".join(_OPTIONS_OF[decorator]))
        return None
    if _reads_config(info, expr, configs):
        project.sink.error("DAGC123", f"`{key}={ast.unparse(expr)}` of @{decorator} reads a Config, which dagc "
                           "cannot know when it compiles", info.source.span(expr),
                           hint=f"dagc sets step options at compile time, before a run loads its configs: write "
                           f"the value itself (`@{decorator}({key}=...)` with a literal or a module-level constant); "
                           "steps read the Config at run time as they are")
        return None
    try:
        value = static_value(expr, info, project)
    except (NotStatic, RecursionError):
        project.sink.error("DAGC123", f"`{key}={ast.unparse(expr)}` of @{decorator} is not a compile-time constant",
                           info.source.span(expr), hint="use a literal or a module-level constant")
        return None
    numeric = expected is not str and expected is not bool
    if value is None and key in ("var", "gpu", "memory"):
        return None
    if not isinstance(value, expected) or numeric and (isinstance(value, bool) or value < 0):
        what = "a string" if expected is str else "True or False" if expected is bool else \
            "a non-negative integer" if expected is int else "a non-negative number"
        project.sink.error("DAGC121", f"`{key}` of @{decorator} must be {what}; got {value!r}",
                           info.source.span(expr), hint=f"write e.g. @{decorator}({key}=...)")
        return None
    return value


def _reads_config(info: ModuleInfo, expr: ast.expr, configs: AbstractSet[str]) -> bool:
    """Whether `expr` is `config_expr("...")` or reads one of the class's Configs (`cfg.retries`)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and dotted_name(info, node.func) in _CONFIG_EXPR:
            return True
        if isinstance(node, ast.Name) and node.id in configs:
            return True
    return False


def _step_options(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                  configs: AbstractSet[str] = frozenset()) -> TaskOptions:
    """The task options the step's Metaflow decorators give (see the module docstring); `configs`: the class's
    Config attributes, which no option can read."""
    fields: dict[str, Any] = {}
    catch = False
    retries = 0
    for decorator in fn.decorator_list:
        if _is_step(info, decorator):
            if isinstance(decorator, ast.Call) and (decorator.args or decorator.keywords):
                project.sink.error("DAGC124", "`@step(...)` with arguments is not supported by dagc",
                                   info.source.span(decorator), fix=bare_decorator_fix(info.source, decorator),
                                   hint="name the first step `start` and the last `end`, and write a bare @step")
            continue
        name = _decorator_name(info, decorator)
        if name in _IGNORED:
            project.sink.warning("DAGC124", f"step decorator @{name} is ignored by dagc", info.source.span(decorator),
                                 hint=_IGNORED[name])
            continue
        if name not in _SUPPORTED:
            project.sink.error("DAGC124", f"step decorator @{ast.unparse(decorator)} is not supported by dagc",
                               info.source.span(decorator), hint=SUPPORTED_HINT)
            continue
        given = {kw.arg: kw.value for kw in decorator.keywords if kw.arg} if isinstance(decorator, ast.Call) else {}
        values = {key: _option(project, info, name, key, expr, configs) for key, expr in given.items()}
        if name == "retry":
            retries = values["times"] if values.get("times") is not None else 3
        elif name == "timeout":
            seconds = sum(float(values.get(k) or 0) * scale for k, scale in
                          (("seconds", 1), ("minutes", 60), ("hours", 3600)))
            if seconds > 0:
                fields["timeout"] = seconds
        elif name == "resources":
            if values.get("cpu") is not None:
                fields["cpus"] = float(values["cpu"])
            if values.get("gpu") is not None:
                fields["gpus"] = float(values["gpu"])
            if values.get("memory") is not None:
                fields["memory"] = int(float(values["memory"]) * MEGABYTE)
        elif name == "catch":
            catch = True
    if retries and not catch:  # with @catch the runtime makes the retries, and catches the last failure
        fields["retries"] = retries
    return TaskOptions(**fields)


def _signature(step: FlowStep, parameters: list[FlowParameter]) -> FunctionSig:
    """What the pipeline passes a step's task: the flow's parameters (start), the artifacts of the step before
    (and the index of a foreach item, for the first step of a foreach), or the list of inputs (a join)."""
    names: list[str]
    if step.name == "start":
        names = [p.attr for p in parameters]
        return FunctionSig(tuple(Param(n, "keyword_only", None, None, _arg(n, step.node)) for n in names))
    names = ["joined"] if step.join else ["parent", "index"]
    params = [Param(n, "positional", None, None, _arg(n, step.node)) for n in names]
    if not step.join:  # `index` only after a foreach
        params[1] = Param("index", "positional", ast.Constant(None), None, params[1].node)
    return FunctionSig(tuple(params))


def _arg(name: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.arg:
    arg = ast.arg(name)
    return ast.copy_location(arg, fn.args.args[0] if fn.args.args else fn)
