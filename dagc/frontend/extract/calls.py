"""Calls in a pipeline body: what is called (task, pipeline, class, config, dagc function), and a task call
bound to its parameters, type-checked, its file paths resolved, made a node."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from typing import Any

from dagc.diagnostics import Note
from dagc.frontend import library as lib
from dagc.frontend.configs import ConfigClass, StaticFunction
from dagc.frontend.dialects import RUNS_EVERY_TASK
from dagc.frontend.extract.context import Component
from dagc.frontend.extract.draws import random_call
from dagc.frontend.extract.messages import LOGGING_HINT, logging_call
from dagc.frontend.extract.options import configured_task
from dagc.frontend.extract.queries import split_types
from dagc.frontend.extract.records import named_tuple_call
from dagc.frontend.extract.values import (
    Callee,
    ClassValue,
    DagcFunction,
    Dyn,
    External,
    ExtractError,
    ModuleValue,
    PathError,
    Poisoned,
    RuntimeUse,
    Scope,
    Static,
    Value,
    is_runtime,
    is_task_result,
    to_operand,
)
from dagc.frontend.fix_edits import kfp_fix
from dagc.frontend.forms import kfp_chain, kfp_hint
from dagc.frontend.modules import (
    FunctionSig,
    ImportedModule,
    ModuleInfo,
    Opaque,
    PipelineDef,
    TaskDef,
    static_option_value,
)
from dagc.frontend.source import name_span
from dagc.frontend.static import NotStatic, ParserMisuse, eval_static
from dagc.frontend.typecheck import compatible, describe_mismatch, item_type
from dagc.ir.core import DIALECT_ATTR, KEEP_ATTR, Node, output_name
from dagc.ir.types import Const, Operand, Ref, Seq, TaskOptions, iter_refs, operand_from_python

_FILE_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class Calls(Component):
    """Calls: binding a task call's arguments and making its node; configs, classes and `dagc.after`."""

    def _callee(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        if isinstance(func, ast.Name):
            return self.cx.exprs.name_value(func, scope, info)
        if isinstance(func, ast.Attribute):
            base = self._callee(func.value, scope, info)
            if isinstance(base, ModuleValue) and base.module == "dagc":
                if func.attr in ("after", "trips", "each"):
                    return DagcFunction(func.attr)
                return External(f"`dagc.{func.attr}`")
            if isinstance(base, ModuleValue):
                symbol = self.cx.project.lookup(base.info, func.attr)
                if symbol is None:
                    sub = self.cx.project.module(f"{base.module}.{func.attr}")
                    if sub is not None:
                        return ModuleValue(sub.name, sub)
                    self.cx.sink.error("DAGC131", f"user module `{base.module}` has no `{func.attr}`",
                                       info.source.span(func), hint=f"check the name in {base.info.source.display}")
                    raise ExtractError
                return self.cx.exprs.symbol_value(symbol, func.attr, base.info, func, info)
            if isinstance(base, ClassValue):
                return self._class_member(base, func, info)
            if is_runtime(base):
                return External(f"method `.{func.attr}()` of a task result")
            return External(f"`{ast.unparse(func)}`")
        if isinstance(func, ast.Call) and isinstance(self._callee(func.func, scope, info), ClassValue):
            return self.cx.exprs.eval(func, scope, info)  # `Flow()` in `Flow().run()`
        return External(f"`{ast.unparse(func)}`")

    def _class_member(self, base: ClassValue, func: ast.Attribute, info: ModuleInfo) -> Value:
        steps, attr = base.steps, func.attr
        member = steps.members.get(attr)
        if member is not None:
            return Callee(member, base.info)
        if attr == "next":
            hint = ("in dagc the pipeline calls the steps in order and passes results on: "
                    "`data = self.start()` then `self.train(data)`")
            self.cx.sink.error("DAGC111", f"`{steps.name}.next` is Metaflow's transition; dagc reads the order "
                               "from the data flow", info.source.span(func), hint=hint)
            raise ExtractError
        what = "not a task" if attr in steps.methods else "not defined"
        tasks = ", ".join(steps.members) or "none"
        self.cx.sink.error("DAGC111" if attr in steps.methods else "DAGC131",
                           f"`{steps.name}.{attr}` is {what} in class `{steps.name}`", info.source.span(func),
                           hint=f"decorate the method with @dagc.task and @staticmethod; steps of `{steps.name}`: "
                           f"{tasks}")
        raise ExtractError

    def call(self, call: ast.Call, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        if isinstance(call.func, ast.Name) and call.func.id == "print" and call.func.id not in scope.env \
                and self.cx.project.lookup(info, "print") is None:
            return self.cx.glue.printed(call, scope, info)
        configured = configured_task(self, call, scope, info)  # `train.options(retries=5)(x)`
        if configured is not None:
            return self._task_call(call, configured, scope, info, n_outputs)
        callee = self._callee(call.func, scope, info)
        if isinstance(callee, Callee) and isinstance(callee.symbol, TaskDef):
            return self._task_call(call, callee.symbol, scope, info, n_outputs)
        if isinstance(callee, Callee) and isinstance(callee.symbol, PipelineDef):
            return self.cx.core.inline_pipeline(call, callee.symbol, scope, info)
        if isinstance(callee, ClassValue) and not callee.instance and callee.steps.members:
            return self._flow_instance(call, callee, info)
        if isinstance(callee, DagcFunction) and callee.name == "trips":
            self.cx.sink.error("DAGC135", "dagc.trips is a hint for the items of a `for` loop, not a value",
                               info.source.span(call), hint="write `for epoch in dagc.trips(range(40), expected=12):`")
            raise ExtractError
        if isinstance(callee, DagcFunction) and callee.name == "each":
            self.cx.sink.error("DAGC170", "dagc.each wraps the items of a `for` loop or comprehension over a task "
                               "result, not a value", info.source.span(call),
                               hint="write `for shard in dagc.each(shards, expected=64):`")
            raise ExtractError
        if isinstance(callee, DagcFunction):
            return self._after_call(call, scope, info, n_outputs)
        if isinstance(callee, (External, ClassValue)):  # `random.seed(s)`, `k = random.randint(1, 9)`: a node
            made = random_call(self.cx, call, scope, info) or named_tuple_call(self.cx, call, scope, info)
            if made is not None:  # (or `Split(train=a, test=b)`: a NamedTuple of task results)
                return made
        if logging_call(call, info.source.tree):
            self.cx.sink.error("DAGC111", f"`{ast.unparse(call.func)}(...)`: logging in a pipeline body is not "
                               "supported (`print` is)", info.source.span(call), hint=LOGGING_HINT)
            raise ExtractError
        helper = self._plain_function(call.func, scope, info)
        if helper is not None:  # `lr = get_lr(it)`: runs where a task would, as the plain run calls it
            return self._task_call(call, helper, scope, info, n_outputs)
        if self.cx.glue.is_glue_call(call, scope) and self.cx.glue.needs_glue(call, scope, info):
            return self.cx.glue.glue(call, scope, info)  # `len(xs)`, `dict(n_layer=n)`, `str(loss)` on task results
        # not a task: it may still be a compile-time builtin on constants (range, len, …)
        args = [self.cx.exprs.eval(a.value if isinstance(a, ast.Starred) else a, scope, info) for a in call.args]
        kwargs = [self.cx.exprs.eval(k.value, scope, info) for k in call.keywords]
        runtime = [v for v in args + kwargs if is_task_result(v)]
        what = callee.description if isinstance(callee, External) else f"`{ast.unparse(call.func)}`"
        if runtime or (isinstance(call.func, ast.Attribute) and self.cx.glue.needs_glue(call.func.value, scope, info)):
            chain = kfp_chain(call)
            if chain is not None:
                step = chain[0].func.value  # type: ignore[attr-defined]
                task = step.func.id if isinstance(step, ast.Call) and isinstance(step.func, ast.Name) else None
                methods = ", ".join(f"`.{c.func.attr}()`" for c in chain)  # type: ignore[attr-defined]
                self.cx.sink.error("DAGC107", f"{methods} on a task result {'is' if len(chain) == 1 else 'are'} "
                                   "Kubeflow's form; a dagc task result is the task's return value, not a step object",
                                   info.source.span(call), hint=kfp_hint(chain, task),
                                   fix=kfp_fix(info.source, call, chain, task and self.cx.project.lookup(info, task)))
                raise ExtractError
            if isinstance(call.func, ast.Name) and call.func.id == "range" and isinstance(callee, External):
                bound = next((ast.unparse(a) for a in call.args if self.cx.glue.needs_glue(a, scope, info)), "")
                self.cx.sink.error(
                    "DAGC107", f"`range` of a task result (`{bound}`): how many trips this loop makes is known "
                    "only at run time", info.source.span(call),
                    hint="parse the script's arguments in the pipeline body, where dagc reads argparse at compile "
                    "time (`args = parser.parse_args()`), or make the bound a pipeline parameter "
                    "(`def main(epochs: int = 14)`); or let a task return the list of items and loop over it "
                    "(a map)")
                raise ExtractError
            self.cx.sink.error("DAGC107", f"{what} is not a task, but receives a task result",
                               info.source.span(call),
                               hint="only tasks can run on task results: decorate the function with @dagc.task, "
                               "or call it inside a task")
            raise ExtractError
        if isinstance(callee, (External, ClassValue)):  # a builtin, os.path, a dataclass config on constants
            try:
                return Static(eval_static(call, self.cx.exprs.static_lookup(scope, info)))
            except Poisoned:
                raise ExtractError from None
            except NotStatic as exc:
                if isinstance(exc, ParserMisuse):
                    self.cx.sink.error("DAGC109", f"argparse: {exc.reason}", info.source.span(exc.node),
                                       hint="dagc reads the parser at compile time: give add_argument literal "
                                       "options (type= int, float, str or bool), and the script's arguments with "
                                       "`--script-args` (`dagc run SCRIPT -- -- ARGS`) as `python SCRIPT ARGS` "
                                       "would take them")
                    raise ExtractError from None
                if self._compile_time_callable(call.func, scope, info):  # a config or os.path call that fails
                    self.cx.sink.error("DAGC109", f"`{ast.unparse(call)}` cannot be evaluated at compile time: "
                                       f"{exc.reason}", info.source.span(exc.node),
                                       hint="fix the arguments as Python would need them")
                    raise ExtractError from None
                if "only a few pure functions" in exc.reason:  # `os.getcwd()`, `os.environ[...]`, `math.fsum`
                    self.cx.sink.error("DAGC109", exc.reason, info.source.span(exc.node),
                                       hint="what depends on the machine, the environment or the clock is not known "
                                       "at compile time: compute it inside a task, or make it a pipeline parameter "
                                       "(os.path.join/dirname/basename and math functions of constants fold)")
                    raise ExtractError from None
            except (RuntimeUse, RecursionError):
                pass
        if isinstance(callee, External) and callee.description.startswith("class "):
            hint = ("build the object inside the task that uses it (a task may also return it, to be passed on), "
                    "giving that task the settings it needs as arguments")
        else:
            hint = "decorate it with @dagc.task to make it a step of the graph, or call it inside a task"
        self.cx.sink.error("DAGC111", f"{what} is not a task; a pipeline body can only call tasks and pipelines",
                           info.source.span(call), hint=hint)
        raise ExtractError

    def _plain_function(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> TaskDef | None:
        """A plain function of the user's called in a pipeline body (`get_lr(it)`, `helpers.report(m)`): the
        call becomes a node like a task's, with the default options; None for anything else. A generator or
        `async` function is not one: its call does not run its body."""
        owner: ModuleInfo | None = info
        name: str | None = None
        if isinstance(func, ast.Name) and func.id not in scope.env and func.id not in scope.assigned_later:
            name = func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id not in scope.env:
            base = self.cx.project.lookup(info, func.value.id)
            owner = self.cx.project.module(base.module) if isinstance(base, ImportedModule) else None
            name = func.attr
        if owner is None or name is None:
            return None
        owner, name = self.cx.exprs.defined_in(owner, name)  # the module that defines it
        symbol = owner.symbols.get(name)
        if not (isinstance(symbol, Opaque) and symbol.kind == "function" and isinstance(symbol.node, ast.FunctionDef)):
            return None
        fn = symbol.node
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
            return None
        made = self.cx.helper_tasks.get(id(fn))
        if made is None:
            made = TaskDef(fn.name, owner.name, fn.name, FunctionSig.of(fn), TaskOptions(),
                           ast.unparse(fn.returns) if fn.returns is not None else None, fn, owner.source)
            self.cx.helper_tasks[id(fn)] = made
        return made

    def _flow_instance(self, call: ast.Call, flow: ClassValue, info: ModuleInfo) -> ClassValue:
        """`Flow()`: an instance of a class of steps, whose pipeline methods run as Python calls them
        (`stats = StatsFlow().run()` inside another pipeline)."""
        name = flow.steps.name
        if call.args or call.keywords or flow.steps.has_init:
            why = "arguments" if call.args or call.keywords else "an `__init__`"
            self.cx.sink.error("DAGC111", f"`{name}` is built with {why}, which a pipeline cannot run",
                               info.source.span(call),
                               hint=f"pass its settings to its pipeline instead: `{name}().run(min_count=5)` on a class "
                               "without `__init__`, whose pipeline takes them as parameters")
            raise ExtractError
        return ClassValue(flow.steps, flow.info, instance=True)

    def _compile_time_callable(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> bool:

        try:
            return isinstance(eval_static(func, self.cx.exprs.static_lookup(scope, info)), (ConfigClass, StaticFunction))
        except (NotStatic, RuntimeUse, RecursionError):
            return False

    def build_config(self, config: Any, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value:
        """One node per instance (as in Python, every use shares the object): `module.Cls(**given)`."""

        found = self.cx.configs.get(id(config))
        if found is not None:
            return found[1]
        if id(config) in self.cx.module_configs and not config.cls.frozen:
            # tasks would change their own copy, while plain Python changes the module's object
            self.cx.sink.error("DAGC109", f"a module-level `{config.cls.name}` that is not frozen cannot be passed to "
                               "a task whole: a task that changes it would change a copy", info.source.span(expr),
                               hint=f"declare it @dataclass(frozen=True), or build it in the pipeline "
                               f"(`cfg = {config.cls.name}(...)`) and pass that")
            raise ExtractError
        try:
            kwargs = tuple((k, operand_from_python(v)) for k, v in config.given)
        except TypeError:
            self.cx.sink.error("DAGC109", f"`{config.cls.name}` is built from values that are not literals",
                               info.source.span(expr), hint="build it with literal field values")
            raise ExtractError from None
        name = self.cx.node_name(scope.prefix + config.cls.name + scope.suffix)
        # frozen: nothing can change it, so calls may be merged; otherwise tasks that change it are ordered
        node = Node(name, "task", config.cls.target, (), kwargs, (name,), (config.cls.name,),
                    TaskOptions(pure=config.cls.frozen), info.source.span(expr))
        self.cx.add_node(node)
        self.cx.modules_used.add(config.cls.module)
        value = Dyn(Ref(name))
        self.cx.configs[id(config)] = (config, value)
        self.cx.config_nodes[name] = config
        return value

    def _after_call(self, call: ast.Call, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        """`dagc.after(task_call(...), *prerequisites)`: run the call after the prerequisites' tasks."""
        if not call.args or call.keywords or not isinstance(call.args[0], ast.Call) or any(
                isinstance(a, ast.Starred) for a in call.args):
            self.cx.sink.error("DAGC128", "dagc.after takes a task call and then the results it must wait for",
                               info.source.span(call), hint="write `x = dagc.after(train(data), prepared, downloaded)`")
            raise ExtractError
        deps: list[str] = []
        for arg in call.args[1:]:
            value = self.cx.exprs.eval(arg, scope, info)
            refs = list(iter_refs(to_operand(value))) if is_runtime(value) else []
            producers = [self.cx.producer[r] for r in refs if r in self.cx.producer]
            if not producers:
                self.cx.sink.error("DAGC128", "a prerequisite of dagc.after must be a task result",
                                   info.source.span(arg), hint="pass the result of the task that must finish first")
                raise ExtractError
            deps.extend(self.cx.visible(p) for p in producers)
        # inside the body of a pipeline that waits (below), a task waits for what the pipeline waits for too
        waiting = self.cx.extra_deps, self.cx.extra_deps_for_all
        after = tuple(dict.fromkeys([*(waiting[0] if waiting[1] else ()), *deps]))
        target = call.args[0]
        callee = self._callee(target.func, scope, info)
        if isinstance(callee, Callee) and isinstance(callee.symbol, PipelineDef):  # every task of its body waits
            return self.cx.core.inline_pipeline(target, callee.symbol, scope, info, after=after)
        self.cx.extra_deps, self.cx.extra_deps_for_all = list(after), False
        try:
            return self.cx.exprs.eval(target, scope, info, n_outputs=n_outputs)
        finally:
            self.cx.extra_deps, self.cx.extra_deps_for_all = waiting

    def bind(self, call: ast.Call, task: TaskDef, scope: Scope, info: ModuleInfo,
              ) -> tuple[list[Operand], list[tuple[str, Operand]], dict[str, Operand]]:
        sig = task.sig
        shape = self.cx.shapes.get(id(sig))
        if shape is None:
            shape = self.cx.shapes[id(sig)] = (
                [p for p in sig.params if p.kind in ("positional_only", "positional")],
                any(p.kind == "var_positional" for p in sig.params),
                any(p.kind == "var_keyword" for p in sig.params),
                {p.name for p in sig.params if p.kind in ("positional", "keyword_only")},
                {p.name: p for p in sig.params},
                [p for p in sig.params if p.kind in ("positional_only", "positional", "keyword_only")
                 and p.default is None],
            )
        positional, var_pos, var_kw, keywordable, by_name, required = shape
        self.cx.bound_exprs = {}
        bound: set[str] = set()
        args: list[Operand] = []
        kwargs: list[tuple[str, Operand]] = []
        named: dict[str, Operand] = {}
        failed = False
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                self.cx.sink.error("DAGC109", "`*args` in a task call is not supported", info.source.span(arg),
                                   hint="pass each argument explicitly")
                failed = True
                continue
            if index >= len(positional) and not var_pos:
                self.cx.sink.error("DAGC105", f"task `{task.name}` takes {len(positional)} positional "
                                   f"argument{'s' if len(positional) != 1 else ''} but {len(call.args)} were given",
                                   info.source.span(arg), hint=f"signature: {task.name}({sig.display()})",
                                   notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
                failed = True
                continue
            param = positional[index] if index < len(positional) else None
            if param is not None:
                bound.add(param.name)
            try:
                operand = to_operand(self.cx.exprs.argument(arg, scope, info))
            except ExtractError:
                failed = True
                continue
            except TypeError:
                self.cx.exprs.not_a_value(arg, info)
                raise
            args.append(operand)
            if param is not None:
                named[param.name] = operand
                self.cx.bound_exprs[param.name] = arg
                self._check_type(operand, param, task, arg, info)
        for kw in call.keywords:
            if kw.arg is None:
                self.cx.sink.error("DAGC109", "`**kwargs` in a task call is not supported", info.source.span(kw),
                                   hint="pass each argument by name")
                failed = True
                continue
            if kw.arg not in keywordable and not var_kw:
                import difflib

                close = difflib.get_close_matches(kw.arg, sorted(keywordable), n=1, cutoff=0.5)
                hint = f"did you mean `{close[0]}`? " if close else ""
                self.cx.sink.error("DAGC103", f"task `{task.name}` has no parameter `{kw.arg}`",
                                   info.source.span(kw),
                                   hint=f"{hint}signature: {task.name}({sig.display()})",
                                   notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
                failed = True
                continue
            if kw.arg in bound:
                self.cx.sink.error("DAGC106", f"argument `{kw.arg}` of task `{task.name}` is given twice",
                                   info.source.span(kw), hint="pass it either by position or by name")
                failed = True
                continue
            bound.add(kw.arg)
            try:
                operand = to_operand(self.cx.exprs.argument(kw.value, scope, info))
            except ExtractError:
                failed = True
                continue
            except TypeError:
                self.cx.exprs.not_a_value(kw.value, info)
                raise
            kwargs.append((kw.arg, operand))
            named[kw.arg] = operand
            self.cx.bound_exprs[kw.arg] = kw.value
            if kw.arg in by_name:
                self._check_type(operand, by_name[kw.arg], task, kw.value, info)
        missing = [p.name for p in required if p.name not in bound]
        if missing:
            names = ", ".join(f"`{m}`" for m in missing)
            self.cx.sink.error("DAGC104", f"task `{task.name}` is missing argument{'s' if len(missing) > 1 else ''} "
                               f"{names}", info.source.span(call),
                               hint=f"signature: {task.name}({sig.display()})",
                               notes=[Note(f"`{task.name}` is defined here", name_span(task.source, task.node))])
            failed = True
        if failed:
            raise ExtractError
        return args, kwargs, named

    def _check_type(self, operand: Operand, param: Any, task: TaskDef, arg: ast.expr, info: ModuleInfo) -> None:
        expected = param.annotation
        if expected is None:
            return
        checks: list[tuple[str, str]] = []
        if isinstance(operand, Ref) and operand.name in self.cx.types:
            checks.append((operand.name, expected))
        elif isinstance(operand, Seq) and operand.kind == "list":
            inner = item_type(expected)
            if inner is not None:
                checks.extend((item.name, inner) for item in operand.items
                              if isinstance(item, Ref) and item.name in self.cx.types)
        for value, want in checks:
            produced, where = self.cx.types[value]
            if compatible(produced, want):
                continue
            ann = param.node.annotation
            notes = []
            if where is not None:
                notes.append(Note(f"`%{value}` is declared `{produced}` here", where))
            notes.append(Note(f"parameter `{param.name}` of `{task.name}` is declared `{expected}` here",
                              task.source.span(ann) if ann is not None else name_span(task.source, task.node)))
            self.cx.sink.error("DAGC140", f"type mismatch: argument `{param.name}` of task `{task.name}` receives "
                               f"`{produced}`, but expects `{expected}`", info.source.span(arg),
                               hint=f"{describe_mismatch(produced, want)}; fix one of the annotations, "
                               "or convert the value in a task", notes=notes)
            return

    def _resolve_paths(self, templates: tuple[str, ...], task: TaskDef, named: dict[str, Operand],
                       call: ast.Call, info: ModuleInfo, option: str) -> tuple[str, ...] | None:
        out: list[str] = []
        assert self.cx.graph is not None
        for template in templates:
            def sub(match: re.Match[str], template: str = template) -> str:
                key = match.group(1)
                operand = named.get(key)
                if operand is None:
                    param = next((p for p in task.sig.params if p.name == key), None)
                    if param is None or param.default is None:
                        raise PathError(f"`{{{key}}}` in {option}={template!r} names no parameter of "
                                        f"`{task.name}` with a value")
                    owner = self.cx.project.module(task.module)
                    try:
                        value = static_option_value(param.default, owner, self.cx.project) if owner else None
                    except NotStatic:
                        raise PathError(f"the default of `{key}` is not a constant") from None
                    return str(value)
                if isinstance(operand, Const):
                    return str(operand.value)
                if isinstance(operand, Ref) and self.cx.graph.is_param(operand.name):
                    const = self.cx.graph.param(operand.name).value
                    if isinstance(const, Const):
                        return str(const.value)
                raise PathError(f"`{{{key}}}` in {option}={template!r} is bound to a value known only at run "
                                "time")

            try:
                path = _FILE_PLACEHOLDER.sub(sub, template)
            except PathError as exc:
                self.cx.sink.error("DAGC125", f"cannot resolve the path of task `{task.name}`: {exc}",
                                   info.source.span(call),
                                   hint="paths are literal strings, or `{name}` placeholders for parameters of the "
                                   "task that receive literals or pipeline parameters")
                return None
            out.append(os.path.normpath(path))
        return tuple(out)

    def _class_values_read(self, classes: list[str]) -> list[str]:
        """The module-level code and values the bodies of `classes` (`module:Class`) read outside their methods
        (`Parameter("n", default=scaled(1))`, `Config("c", default=CONFIG_PATH)`): a change to one changes what
        the class's steps see."""
        found: list[str] = []
        for name in classes:
            module, _, cls = name.partition(":")
            info = self.cx.project.module(module)
            symbol = info.symbols.get(cls) if info is not None else None
            if isinstance(symbol, Opaque) and isinstance(symbol.node, ast.ClassDef):
                found.extend(sorted(self.cx.analyzer.of_class_body(symbol.node, info).reaches))
        return found

    def _task_call(self, call: ast.Call, task: TaskDef, scope: Scope, info: ModuleInfo, n_outputs: int) -> Value:
        extra = self.cx.take_extra_deps()
        args, kwargs, named = self.bind(call, task, scope, info)
        name = self.cx.node_name(scope.prefix + task.name + scope.suffix)
        span = info.source.span(call)
        if n_outputs == 1:  # (the common case, without a generator)
            outputs: tuple[str, ...] = (name,)
            types: tuple[str | None, ...] = (task.returns,)
        else:
            outputs = tuple(output_name(name, i, n_outputs) for i in range(n_outputs))
            types = split_types(task.returns, n_outputs)
        deps: dict[str, None] = {}
        for after in task.after:
            for dep in self.cx.nodes_by_task.get(after, ()):
                deps.setdefault(self.cx.visible(dep), None)
        for dep in extra:
            deps.setdefault(dep, None)
        options = task.options
        if options.reads or options.writes:
            reads = self._resolve_paths(options.reads, task, named, call, info, "reads")
            writes = self._resolve_paths(options.writes, task, named, call, info, "writes")
            if reads is None or writes is None:
                raise ExtractError
            options = dataclasses.replace(options, reads=reads, writes=writes)
            for path in reads:
                written = self.cx.written_as(path)
                if written is not None:
                    deps.setdefault(self.cx.visible(self.cx.writers[written][0]), None)
                    self.cx.readers.setdefault(written, []).append(name)  # a rewrite of it waits for this read
                else:
                    self.cx.reads.append((path, name, span))
            for path in writes:
                if path in self.cx.writers:
                    first, where = self.cx.writers[path]
                    if where != span:
                        self.cx.sink.error("DAGC126", f"`{path}` is written by two tasks: `{first}` and `{name}`",
                                           span, notes=[Note(f"`{first}` writes it here", where)],
                                           hint="give each task its own output path; one call in a loop "
                                           "(a checkpoint saved every epoch) may overwrite its own file")
                        continue
                    # the same call again, in an unrolled loop: a checkpoint overwritten in program order,
                    # after the previous write and after every task that read that version
                    deps.setdefault(self.cx.visible(first), None)
                    for reader in self.cx.readers.pop(path, []):
                        if reader != name:
                            deps.setdefault(self.cx.visible(reader), None)
                self.cx.writers[path] = (name, span)
        node = Node(name, "task", task.target, tuple(args), tuple(kwargs), outputs, types, options,
                    span, tuple(deps))
        if task.dialect is not None:
            node.attrs[DIALECT_ATTR] = task.dialect
            if task.dialect in RUNS_EVERY_TASK:
                node.attrs[KEEP_ATTR] = True
        self.cx.state.record_effects(node, task, named, scope, info)
        # a framework's step method reads its class (helpers, class values); a task defined inside a function
        # (an Airflow DAG's) reads what that function binds before it: the outermost definition covers both
        outer, nested, _ = task.qualname.partition(".<locals>.")
        owner = outer if nested else task.qualname.rpartition(".")[0]
        if task.dialect is not None and owner:  # (and the bases of its class, and what their values read)
            classes = [f"{task.module}:{owner}", *task.bases]
            reached = [*node.attrs.get("code.reaches", ()), *classes, *self._class_values_read(classes)]
            node.attrs["code.reaches"] = list(dict.fromkeys(reached))
            self.cx.modules_used.update(name.partition(":")[0] for name in reached)
        if task.bases:  # an inherited method is its base's function: the program passes the class it is called on
            node.attrs["task.class"] = owner
        self.cx.last_task = node
        if scope.inlined:
            node.attrs["frontend.scope"] = scope.inlined
        self.cx.add_node(node)
        self.cx.modules_used.add(task.module)
        self.cx.nodes_by_task.setdefault(task.name, []).append(name)
        if task.returns is not None:
            key = id(task)
            if key not in self.cx.return_spans:
                self.cx.return_spans[key] = (task.source.span(task.node.returns)
                                             if task.node.returns is not None else None)
            where = self.cx.return_spans[key]
            for value, t in zip(outputs, types):
                if t is not None:
                    self.cx.types[value] = (t, where)
        else:  # (for effects only: the IR keeps the task's own annotation, none)
            for value, returned in zip(outputs, self._returned_classes(task, n_outputs)):
                if returned is not None:
                    self.cx.returned[value] = returned
        if n_outputs == 1:
            return Dyn(Ref(outputs[0]))
        return tuple(Dyn(Ref(o)) for o in outputs)

    def _returned_classes(self, task: TaskDef, n_outputs: int) -> tuple[str | None, ...]:
        """Per output, the class every `return` of `task`'s body builds there, named as the task's module names
        it: `return DataLoader(ds, ...)`, `return Net().to(device)`, `return model, optimizer, loader` of names
        the body binds to such calls (mnist's `setup`); None where the returns differ or build no class."""
        key = (id(task), n_outputs)
        found = self.cx.returned_by_task.get(key)
        if found is not None:
            return found
        body_nodes = [n for n in ast.walk(ast.Module(body=task.node.body, type_ignores=[]))]
        assigned: dict[str, list[ast.expr]] = {}
        for node in body_nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                assigned.setdefault(node.target.id, []).append(node.value) if node.value is not None else None
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.setdefault(node.id, [])  # bound otherwise (a loop, unpacking): unknown

        def class_of(expr: ast.expr | None, depth: int = 0) -> str | None:
            if expr is None or depth > 8:
                return None
            if isinstance(expr, ast.Call):
                func = expr.func
                if isinstance(func, ast.Attribute) and func.attr in lib.RETURNS_SELF:  # `Net().to(device)`
                    return class_of(func.value, depth + 1)
                last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                return ast.unparse(func) if last[:1].isupper() else None
            if isinstance(expr, ast.Name):
                sources = assigned.get(expr.id)
                if not sources:
                    return None
                classes = {class_of(v, depth + 1) for v in sources}
                return classes.pop() if len(classes) == 1 else None
            return None

        columns: list[set[str | None]] = [set() for _ in range(n_outputs)]
        for node in body_nodes:
            if not isinstance(node, ast.Return) or self._inside_nested(node, task.node):
                continue
            values: list[ast.expr | None]
            if n_outputs == 1:
                values = [node.value]
            elif isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == n_outputs:
                values = list(node.value.elts)
            else:
                values = [None] * n_outputs
            for column, value in zip(columns, values):
                column.add(class_of(value))
        found = tuple(c.pop() if len(c) == 1 else None for c in columns)
        self.cx.returned_by_task[key] = found
        return found

    @staticmethod
    def _inside_nested(node: ast.AST, fn: ast.AST) -> bool:
        """Whether `node` lies in a function, lambda or class nested in `fn` (its `return` is not fn's)."""
        for inner in ast.walk(fn):
            if inner is not fn and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                if any(n is node for n in ast.walk(inner)):
                    return True
        return False
