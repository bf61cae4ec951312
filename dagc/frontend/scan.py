"""Scanning the top level of a user module: decorators, signatures, options, constants, imports.

One small function per concern; each reports its own diagnostics and names the accepted forms.
"""

from __future__ import annotations

import ast
import difflib
import re
import weakref
from typing import Any

from dagc import units
from dagc.annotations import TASK_OPTIONS
from dagc.fixes import Fix
from dagc.frontend.arguments import StaticArgParser, StaticArgs, parsed
from dagc.frontend.configs import ConfigValue
from dagc.frontend.dialects import DecoratorForm, decorator_form, scan_dialect_with, with_dialect
from dagc.frontend.fix_edits import rename_option_fix
from dagc.frontend.modules import (
    Constant,
    FunctionSig,
    ImportedModule,
    ImportedName,
    ModuleInfo,
    Opaque,
    PipelineDef,
    Project,
    TaskDef,
    resolve_relative,
    static_option_value,
    static_value,
)
from dagc.frontend.static import NotStatic, StaticIterator, is_literal_value
from dagc.ir.types import TaskOptions

__all__ = ["scan_module", "decorator_kind", "is_main_guard"]

SMALL_MEMORY = 2**20  # a task's memory given as a bare number below 1 MiB is almost surely not bytes


def is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either operand order)."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    test = stmt.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts)


def decorator_kind(info: ModuleInfo, expr: ast.expr) -> tuple[str, ast.Call | None] | None:
    """("task"|"pipeline", call-or-None) when `expr` is a dagc decorator, however it was imported."""
    call = expr if isinstance(expr, ast.Call) else None
    target = expr.func if call is not None else expr
    if isinstance(target, ast.Name) and info.dagc_names.get(target.id) in ("task", "pipeline"):
        return info.dagc_names[target.id], call
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id in info.dagc_modules
        and target.attr in ("task", "pipeline")
    ):
        return target.attr, call
    return None


def _record_import(project: Project, info: ModuleInfo, stmt: ast.Import | ast.ImportFrom) -> None:
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.name == "dagc":
                info.dagc_modules.add(alias.asname or "dagc")
            elif alias.asname:
                info.symbols.setdefault(alias.asname, ImportedModule(alias.name, stmt))
            else:
                top = alias.name.split(".")[0]
                info.symbols.setdefault(top, ImportedModule(top, stmt))
        return
    module = resolve_relative(info.package, stmt.level, stmt.module)
    if module is None:
        project.sink.error("DAGC130", "relative import goes beyond the top-level package",
                           info.source.span(stmt), hint="use an absolute import")
        return
    if module == "dagc":
        for alias in stmt.names:
            if alias.name in ("task", "pipeline", "after", "trips", "each"):
                info.dagc_names[alias.asname or alias.name] = alias.name
        return
    if stmt.level > 0 and project.module(module) is None and not any(
        project.module(f"{module}.{a.name}") for a in stmt.names
    ):
        project.sink.error("DAGC130", f"cannot find user module `{module}` imported here",
                           info.source.span(stmt),
                           hint=f"dagc looks for it under {project.root}; check the module path")
        return
    for alias in stmt.names:
        if alias.name == "*":
            continue
        info.symbols.setdefault(alias.asname or alias.name, ImportedName(module, alias.name, stmt))


def _option_error(project: Project, info: ModuleInfo, code: str, message: str, node: ast.AST, hint: str,
                  fix: Fix | None = None) -> None:
    project.sink.error(code, message, info.source.span(node), hint=hint, fix=fix)


def _convert_option(project: Project, info: ModuleInfo, key: str, value: Any, node: ast.expr) -> Any:
    """Check one option value against its spec; returns the IR value or raises ValueError (reported)."""
    spec = TASK_OPTIONS[key]
    kind = spec.kind

    def bad_type() -> ValueError:
        _option_error(project, info, "DAGC121", f"option `{key}` must be {spec.accepted}; got {value!r}",
                      node, hint=f"{key}: {spec.doc}")
        return ValueError(key)

    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "cpus" and isinstance(value, str):
        try:
            return units.parse_cpus(value)
        except units.UnitError as exc:
            _option_error(project, info, "DAGC122", f"option `{key}`: {exc}", node, hint=f"write {key}= {spec.accepted}")
            raise ValueError(key) from None
    if kind in ("count", "number", "cpus"):
        if not is_number or value < 0 or value != value or value in (float("inf"),):
            raise bad_type()
        if key == "gpus" and value > 1 and value != int(value):
            _option_error(project, info, "DAGC121", f"gpus above 1 must be a whole number; got {value!r}", node,
                          hint="fractional GPUs are allowed only below 1 (e.g. 0.5 to share one GPU)")
            raise ValueError(key)
        return float(value)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or (key == "retries" and value < 0):
            raise bad_type()
        return value
    if kind == "posint":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad_type()
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad_type()
        return value
    if kind in ("duration", "size"):
        if isinstance(value, bool):
            raise bad_type()
        try:
            parsed = units.parse_duration(value) if kind == "duration" else units.parse_size(value)
            if key == "timeout" and not parsed > 0:
                raise bad_type()
        except units.UnitError as exc:
            code = "DAGC122" if isinstance(value, str) else "DAGC121"
            _option_error(project, info, code, f"option `{key}`: {exc}", node, hint=f"write {key}= {spec.accepted}")
            raise ValueError(key) from None
        if key == "memory" and not isinstance(value, str) and 0 < value < SMALL_MEMORY:
            # schedulers that take a bare number mostly mean MB (Ray's old API, Slurm, Metaflow)
            project.sink.warning(
                "DAGC129", f"memory={value!r} is {value!r} bytes; did you mean megabytes?",
                info.source.span(node),
                hint=f'a bare number is bytes; write memory="{value}MB" (or "{value}Mi") if megabytes were meant, '
                f'or memory="{value}B" to keep bytes')
        return parsed
    if kind in ("names", "paths"):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise bad_type()
        return tuple(value)
    if kind == "compress":
        if value not in ("bf16", "fp16"):
            raise bad_type()
        return value
    if kind == "reduce":
        if value not in ("sum", "mean"):
            raise bad_type()
        return value
    if kind == "resources":
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for k, v in value.items()
        ):
            raise bad_type()
        return tuple(sorted((k, float(v)) for k, v in value.items()))
    raise AssertionError(kind)


def dagc_decorator_error(project: Project, info: ModuleInfo, fn: ast.AST, second: ast.expr) -> None:
    name = getattr(fn, "name", "?")
    project.sink.error("DAGC124", f"`{name}` has more than one dagc decorator", info.source.span(second),
                       hint="a function is either a @dagc.task or a @dagc.pipeline, once")


def task_options(project: Project, info: ModuleInfo, call: ast.Call | None) -> tuple[TaskOptions, tuple[str, ...]]:
    if call is None:
        return TaskOptions(), ()
    for arg in call.args:
        _option_error(project, info, "DAGC124", "task options must be given by keyword", arg,
                      hint='write e.g. @dagc.task(gpus=1, cost="2m")')
    fields: dict[str, Any] = {}
    after: tuple[str, ...] = ()
    for kw in call.keywords:
        if kw.arg is None:
            _option_error(project, info, "DAGC124", "`**options` in a task decorator cannot be read statically",
                          kw.value, hint="write each option as a keyword with a literal value")
            continue
        if kw.arg not in TASK_OPTIONS:
            close = difflib.get_close_matches(kw.arg, TASK_OPTIONS, n=1)
            suggestion = f"did you mean `{close[0]}`? " if close else ""
            _option_error(project, info, "DAGC120", f"unknown task option `{kw.arg}`", kw,
                          hint=f"{suggestion}accepted options: {', '.join(TASK_OPTIONS)}",
                          fix=rename_option_fix(info.source, call, kw, close[0]) if close else None)
            continue
        try:
            value = static_option_value(kw.value, info, project)
        except NotStatic as exc:
            _option_error(project, info, "DAGC123", f"option `{kw.arg}` is not a compile-time constant: {exc.reason}",
                          kw.value, hint="use a literal or a module-level constant")
            continue
        try:
            converted = _convert_option(project, info, kw.arg, value, kw.value)
        except ValueError:
            continue
        if kw.arg == "after":
            after = converted
        else:
            fields[kw.arg] = converted
    return TaskOptions(**fields), after


def _define_function(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    kinds = [(d, decorator_kind(info, d)) for d in fn.decorator_list]
    dagc_decorators = [(d, k) for d, k in kinds if k is not None]
    if not dagc_decorators:
        framework = [found for d in fn.decorator_list if (found := decorator_form(info, d)) is not None]
        if framework:
            _define_dialect_function(project, info, fn, *framework[0])
            return
        info.symbols.setdefault(fn.name, Opaque("function", fn))
        return
    if len(dagc_decorators) > 1:
        dagc_decorator_error(project, info, fn, dagc_decorators[1][0])
    decorator, (kind, call) = dagc_decorators[0]
    sig = FunctionSig.of(fn)
    if kind == "task":
        options, after = task_options(project, info, call)
        if options.reduce is not None:
            _check_reduction(project, info, fn)
        info.tasks[fn.name] = TaskDef(
            fn.name, info.name, fn.name, sig, options,
            ast.unparse(fn.returns) if fn.returns is not None else None, fn, info.source, after,
        )
        info.symbols[fn.name] = info.tasks[fn.name]
    else:
        if call is not None and (call.args or any(kw.arg not in ("name", "priority") for kw in call.keywords)):
            project.sink.error("DAGC124", "@dagc.pipeline accepts only `name=` and `priority=`",
                               info.source.span(call),
                               hint="write @dagc.pipeline or @dagc.pipeline(name=\"train\", priority=1)")
        name = fn.name
        priority = 0
        for kw in call.keywords if call is not None else ():
            if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                name = kw.value.value
            elif kw.arg == "priority":
                priority = pipeline_priority(project, info, kw.value)
        info.pipelines[name] = PipelineDef(name, info.name, sig, fn, info.source, weakref.ref(info),
                                           priority=priority)
        info.symbols[fn.name] = info.pipelines[name]


def _define_dialect_function(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                             form: DecoratorForm, call: ast.Call | None) -> None:
    """A task or pipeline written for another framework (`@dsl.component`, `@flow`), read by its dialect's module
    (dagc.frontend.dialects.<dialect>): `task_options(project, info, call)` reads a task decorator's options,
    `refine_task(project, info, task)` (where defined) gives the task as the framework's pipelines call it, and
    `pipeline_node(project, info, fn)` gives a pipeline's body rewritten into dagc's forms."""
    import importlib

    dialect = importlib.import_module(f"dagc.frontend.dialects.{form.dialect}")
    sig = FunctionSig.of(fn)
    if form.kind == "task":
        options, after = dialect.task_options(project, info, call)
        task = TaskDef(fn.name, info.name, fn.name, sig, options,
                       ast.unparse(fn.returns) if fn.returns is not None else None, fn, info.source, after,
                       dialect=form.dialect)
        refine_task = getattr(dialect, "refine_task", None)
        info.tasks[fn.name] = refine_task(project, info, task) if refine_task is not None else task
        info.symbols[fn.name] = info.tasks[fn.name]
        return
    body = dialect.pipeline_node(project, info, fn)
    info.pipelines[fn.name] = PipelineDef(fn.name, info.name, sig, body, info.source, weakref.ref(info),
                                          dialect=form.dialect)
    info.symbols[fn.name] = info.pipelines[fn.name]


def pipeline_priority(project: Project, info: ModuleInfo, expr: ast.expr) -> int:
    """`priority=` of a pipeline: an integer known at compile time (higher runs first; default 0)."""
    try:
        value = static_option_value(expr, info, project)
    except NotStatic:
        value = None
    if isinstance(value, bool) or not isinstance(value, int):
        project.sink.error("DAGC124", f"`priority={ast.unparse(expr)}` is not an integer known at compile time",
                           info.source.span(expr),
                           hint="write an integer literal or a module constant: priority=2 (higher runs first)")
        return 0
    return value


_TENSOR_LIST = re.compile(r"^(?:list|List|Sequence|typing\.List)\[\s*(?:torch\.)?Tensor\s*\]$")
_TENSOR = re.compile(r"^(?:torch\.)?Tensor$")


def _check_reduction(project: Project, info: ModuleInfo, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """`reduce=` promises that the task adds up its one argument, a list of tensors, into a tensor:
    its signature must say so (the torch backend may run a collective instead of its body)."""
    args = fn.args
    params = [*args.posonlyargs, *args.args]
    annotation = ast.unparse(params[0].annotation).strip("'\"") if params and params[0].annotation else ""
    returns = ast.unparse(fn.returns).strip("'\"") if fn.returns is not None else ""
    if len(params) != 1 or args.vararg or args.kwonlyargs or args.kwarg or not _TENSOR_LIST.match(annotation) \
            or not _TENSOR.match(returns):
        project.sink.error(
            "DAGC136", f"`{fn.name}` declares reduce= but is not `def {fn.name}(parts: list[torch.Tensor]) -> "
            "torch.Tensor`", info.source.span(params[0] if params else fn),
            hint="a reduction task takes exactly one parameter annotated list[torch.Tensor] and returns a "
            "torch.Tensor: their sum (reduce=\"sum\") or mean (reduce=\"mean\")")


def _define_constant(project: Project, info: ModuleInfo, target: ast.expr, value: ast.expr | None) -> None:
    if not isinstance(target, ast.Name):
        return
    if value is None:
        return

    token = parsed.set(None)  # (a module-level parse is not the pipeline body's: see Interpreter.extract)
    try:
        constant = static_value(value, info, project)
    except NotStatic:
        info.symbols[target.id] = Opaque("value", value)
        return
    finally:
        parsed.reset(token)
    if isinstance(constant, (StaticArgParser, StaticArgs)) and not _changed_in_module(info, target.id, parsers=True):
        # the script's argparse parser and what it parsed at module level (reinforce, word_language_model):
        # read at compile time as in a pipeline body (dagc.frontend.arguments)
        info.symbols[target.id] = Constant(constant, value)
        return
    frozen_items = isinstance(constant, tuple) and all(
        is_literal_value(c) or isinstance(c, ConfigValue) and c.cls.frozen for c in constant)
    # (an iterator of literals, `itertools.product(...)`: each compile hands its items to the first loop only)
    literal_iterator = isinstance(constant, StaticIterator) and is_literal_value(list(constant.items))
    if is_literal_value(constant) or frozen_items or literal_iterator or isinstance(constant, ConfigValue) and (
            constant.cls.frozen or not _changed_in_module(info, target.id)):
        info.symbols[target.id] = Constant(constant, value)
    elif isinstance(constant, ConfigValue):
        info.symbols[target.id] = Opaque("value", value, why=(
            f"is a `{constant.cls.name}` the module changes after building it, so its fields are not known at "
            f"compile time; declare `{constant.cls.name}` with @dataclass(frozen=True) and build changed copies "
            "with dataclasses.replace, or build the config in the pipeline"))
    else:
        info.symbols[target.id] = Opaque("value", value)


def _changed_in_module(info: ModuleInfo, name: str, *, parsers: bool = False) -> bool:
    """`CFG.lr = …`, `CFG.tags.append(…)`, `setattr(CFG, …)` or `global CFG` anywhere in the module:
    a config instance that is not frozen may then hold other values at run time than it was built with.
    With `parsers`, a parser's own `add_argument`/`set_defaults` calls at module level do not count (they are
    read in order, as the module runs them)."""
    for node in ast.walk(info.source.tree):
        if parsers and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("add_argument", "set_defaults", "parse_args") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            continue
        if isinstance(node, ast.Global) and name in node.names:
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            root = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            root = node.func.value  # `CFG.tags.append(x)`: a method may change the object
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "setattr", "delattr", "vars") and node.args:
            root = node.args[0]
        else:
            continue
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name) and root.id == name:
            return True
    return False


def _scan_block(project: Project, info: ModuleInfo, body: list[ast.stmt]) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _record_import(project, info, stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _define_function(project, info, stmt)
        elif isinstance(stmt, ast.ClassDef):
            from dagc.frontend.classes import scan_class
            from dagc.frontend.dialects import scan_dialect_class

            flow = scan_dialect_class(project, info, stmt)  # a framework's flow class (Metaflow's FlowSpec)
            info.symbols.setdefault(stmt.name, flow if flow is not None else scan_class(project, info, stmt))
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                _define_constant(project, info, target, stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            _define_constant(project, info, stmt.target, stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, ast.Attribute) and isinstance(stmt.value.func.value, ast.Name) \
                and isinstance(getattr(info.symbols.get(stmt.value.func.value.id), "value", None), StaticArgParser):
            try:  # `parser.add_argument("--epochs", type=int, default=10)` at module level: the parser grows
                static_value(stmt.value, info, project)
            except NotStatic as exc:
                project.sink.error("DAGC109", f"argparse: {exc.reason}", info.source.span(exc.node),
                                   hint="dagc reads the script's parser at compile time: give add_argument literal "
                                   "options (type= int, float, str or bool)")
        elif isinstance(stmt, ast.If) and not is_main_guard(stmt):
            _scan_block(project, info, stmt.body)
            _scan_block(project, info, stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            # `with open(...) as f:` binds f to something unknown; constants assigned inside are still constants
            for item in stmt.items:
                if isinstance(item.optional_vars, ast.Name):
                    info.symbols[item.optional_vars.id] = Opaque("value", item.context_expr)
            _scan_block(project, info, stmt.body)
            if isinstance(stmt, ast.With):
                scan_dialect_with(project, info, stmt)  # a framework's pipeline block (Airflow's `with DAG(...)`)
        elif isinstance(stmt, ast.Try):
            _scan_block(project, info, stmt.body)
            for handler in stmt.handlers:
                _scan_block(project, info, handler.body)


def _check_tasks_outside_pipelines(project: Project, info: ModuleInfo) -> None:
    """A task called at module level runs eagerly on import and is part of no graph."""
    for stmt in info.source.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        if is_main_guard(stmt) or isinstance(stmt, ast.With) and with_dialect(info, stmt) is not None:
            continue  # (a framework's pipeline block calls its tasks to build the pipeline, running none)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                symbol = project.lookup(info, node.func.id)
                if isinstance(symbol, TaskDef):
                    project.sink.error(
                        "DAGC110",
                        f"task `{node.func.id}` is called outside a pipeline",
                        info.source.span(node),
                        hint="call tasks inside a @dagc.pipeline function, or under "
                        "`if __name__ == \"__main__\":` to run them as plain Python",
                    )


def scan_module(project: Project, info: ModuleInfo) -> None:
    _scan_block(project, info, info.source.tree.body)
    _check_tasks_outside_pipelines(project, info)
