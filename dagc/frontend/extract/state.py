"""Effects and shared state: a task's effects recorded on its node, objects that two tasks would share,
random draws, module-level values the pipeline changes or folds, and the diagnostics about them."""

from __future__ import annotations

import ast
import os
from dataclasses import replace
from typing import Any

from dagc.diagnostics import Note
from dagc.frontend.effects.summary import is_scalar_type
from dagc.frontend.extract.context import Component
from dagc.frontend.extract.values import Dyn, ExtractError, Scope, Static, Value, mutable_ids
from dagc.frontend.fix_edits import readonly_without, task_option_fix
from dagc.frontend.modules import ModuleInfo, TaskDef
from dagc.frontend.source import name_span
from dagc.ir.core import KEEP_ATTR, Graph, Node
from dagc.ir.facts import Effects, FilePaths
from dagc.ir.location import SourceSpan
from dagc.ir.types import Map, Operand, Ref, Seq, iter_refs

# argument expressions that build a new object at the call: a change to it is seen by nobody else
_FRESH_OBJECT_EXPRS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Call,
                       ast.BinOp)


class StateChecks(Component):
    """Records effects on nodes and reports what the graph would share or change behind the user's back."""

    def record_effects(self, node: Node, task: TaskDef, named: dict[str, Operand], scope: Scope,
                       info: ModuleInfo) -> None:
        """Write what the call may do into `node.effects` (see dagc.ir.effects), after the task's
        declarations; a list or dict built in the pipeline that the task changes becomes a value."""
        options = task.options
        summary = self.cx.task_summaries.get(id(task))
        if summary is None:
            summary = self.cx.task_summaries[id(task)] = self._summarize_effects(task)
        types = self._passed_types(task, named)
        if types:  # what the call passes says more than the task's signature (`test(model, test_loader)`)
            key = (id(task), types)
            typed = self.cx.typed_summaries.get(key)
            if typed is None:
                typed = self.cx.typed_summaries[key] = self._summarize_effects(task, types)
            summary = typed
        effects, facts, reaches, mutable = summary
        observed = self._observed(node.name)
        if observed is not None and not options.pure:  # what an earlier run saw it do (dagc.frontend.observed)
            known = {param for param, _ in mutable}
            mutable = [*mutable, *((p, False) for p in sorted(observed.params)
                                   if p in named and p not in known and p not in options.readonly)]
            if observed.rng and not facts.rng:
                facts = replace(facts, rng=f"drew from the global generator ({', '.join(sorted(observed.rng))}) "
                                f"in an earlier run ({observed.run_dir})")
            self._warn_observed(node, task, observed)
        if reaches:  # their files, in graph.modules
            self.cx.modules_used.update(name.partition(":")[0] for name in reaches)
            node.attrs["code.reaches"] = list(reaches)  # (a copy per node: passes may edit one node's attributes)
        self.cx.bound_args[node.name] = named  # for hints that name the parameters (`readonly=[...]`)
        if facts.files:
            paths = self._static_paths(task, effects, named)
            if paths is None and (node.options.reads or node.options.writes):  # declared: the files it touches
                paths = FilePaths(tuple(sorted(node.options.reads)), tuple(sorted(node.options.writes)))
            if paths is None and task.dialect == "kfp":  # a KFP component runs in a container of its own: the
                paths = FilePaths((), ())  # only files it shares are the artifacts passed to it, ordered as data
            if paths is not None:  # every file it touches is named at this call: ordered by path
                facts = replace(facts, paths=paths)
            elif effects.file_write is not None and not options.writes:  # (for DAGC164)
                self.cx.unnamed_writes[node.name] = (effects.file_write.reason, effects.file_write.span(task.source.display))
        node.effects = facts
        if options.pure:
            return
        if effects.rng is not None and effects.rng_depends:
            self._warn_rng(task, effects, node)
            self.cx.pipeline_seeds = self.cx.pipeline_seeds or effects.seeds
        if effects.globals_written:
            where = task.source.display
            for gname, evidence in effects.globals_written.items():
                self.cx.global_writes.setdefault(gname, (evidence.reason, evidence.span(where)))
        mutated: dict[str, None] = {}
        for param, spread in mutable:
            if spread:  # *args / **kwargs: any argument not bound to a named parameter
                bound = set(named.values())
                operands = [o for o in node.operands() if o not in bound]
            elif param in named:
                operands = [self._materialize(param, named[param], node, scope, info)]
                evidence = effects.mutates.get(param)
                if evidence is not None:
                    self.cx.mutators.setdefault(node.name, []).append(
                        (param, evidence.reason, evidence.span(task.source.display)))
            else:
                continue  # a default value: the task's own object
            for operand in operands:
                # a value of an immutable type (`-> str`, `-> Path`) cannot be changed, whatever the body does
                mutated.update(dict.fromkeys(r for r in iter_refs(operand)
                                             if not is_scalar_type(self.cx.types.get(r, (None, None))[0])))
        if mutated:
            node.effects = replace(node.effects, mutates=tuple(Ref(v) for v in mutated))
            self._config_changed(mutated, scope)

    def _observed(self, name: str) -> Any:
        """What earlier runs of this script observed task `name` do that its code does not show (loaded once)."""
        if self.cx.observed is None:
            from dagc.frontend.observed import observed_effects

            assert self.cx.graph is not None
            self.cx.observed = observed_effects(self.cx.project.entry, self.cx.graph.name)
        return self.cx.observed.get(name)

    def _warn_observed(self, node: Node, task: TaskDef, observed: Any) -> None:
        what = [f"changed `{p}` in place" for p in sorted(observed.params)]
        what += [f"drew from the global generator ({', '.join(sorted(observed.rng))})"] if observed.rng else []
        if not what:
            return
        declare = f"`@dagc.task(mutates={sorted(observed.params)!r})`" if observed.params else \
            "a seed inside the task (or `pure=True` if the draws do not matter)"
        self.cx.sink.warning(
            "DAGC163", f"task `{node.name}` {' and '.join(what)} in an earlier run where its code does not show it "
            f"({observed.run_dir}): dagc now assumes it does", node.span,
            hint=f"declare it, {declare}, so that the assumption does not rest on run records (they are no "
                 "longer read once the script changes)")

    def _passed_types(self, task: TaskDef, named: dict[str, Operand]) -> frozenset[tuple[str, str]]:
        """(parameter, type) for each parameter of `task` without an annotation that this call binds to a task's
        output of a known type: the producer's return annotation, or the class its body returns."""
        found = []
        for param in task.sig.params:
            if param.annotation is not None or param.name not in named:
                continue
            operand = named[param.name]
            if isinstance(operand, Ref):
                known = self.cx.types.get(operand.name, (None, None))[0] or self.cx.returned.get(operand.name)
                if known is not None:
                    found.append((param.name, known))
        return frozenset(found)

    def _summarize_effects(self, task: TaskDef, types: frozenset[tuple[str, str]] = frozenset(),
                           ) -> tuple[Any, Effects, list[str], list[tuple[str, bool]]]:
        """What every call of `task` shares (with `types`: every call passing values of those types): its
        effects, the node record they give, the code it reaches, and the parameters it may change (with whether
        each is `*args`/`**kwargs`). Checks its declarations once."""
        options = task.options
        effects = self.cx.analyzer.of_task(task, types)
        if not types:
            self._check_declarations(task, effects)
        # the code its run-time fingerprint covers besides its own (backends/fingerprint.py)
        reaches = sorted(effects.reaches - {task.target})
        drawn = tuple(self.drawn_globals(reaches)) if reaches else ()
        if options.pure:
            return effects, Effects(drawn=drawn), reaches, []
        where = task.source.display

        def said(evidence: Any) -> str | None:
            return None if evidence is None else f"{evidence.reason} ({where}:{evidence.line})"

        rng = said(effects.rng)
        files = None if effects.file_write is None and effects.file_read is None else \
            "write" if effects.file_write is not None else "read"
        facts = Effects(
            io="declared side_effects=True" if options.side_effects else said(effects.world),
            output=said(effects.output),
            # its result is no part of its arguments' state (or these items of its tuple are not: ir/effects.py)
            fresh=bool(effects.fresh_result),
            fresh_items=None if effects.fresh_result or effects.fresh_items is None else tuple(effects.fresh_items),
            varies=said(effects.varies),  # not an effect: only what the local program may compute again
            rng=rng, seeded=bool(rng) and bool(effects.seeds),
            # its draws only advance the generator (orders later drawers only)
            rng_advances=bool(rng) and not effects.rng_depends,
            files=files, writes=tuple(sorted(effects.globals_written)), reads=tuple(sorted(effects.globals_read)),
            drawn=drawn)
        spread = {p.name for p in task.sig.params if p.kind in ("var_positional", "var_keyword")}
        mutable = [(param, param in spread)
                   for param in dict.fromkeys([*effects.mutates, *options.mutates])  # read in the body, and declared
                   if param not in options.readonly]
        return effects, facts, reaches, mutable

    def drawn_globals(self, reaches: list[str]) -> list[str]:
        """`module.NAME: why` for each module-level value among `reaches` (`module:NAME`) that holds random
        numbers drawn at import with no seed set before (ir/effects.py, effects.drawn)."""
        found = []
        for target in reaches:
            module, _, name = target.partition(":")
            info = self.cx.project.module(module)
            if info is None or "." in name:
                continue
            drawn = self.cx.analyzer.drawn_at_import(info, name)
            if drawn is not None:  # (named by the value drawn: `W2 = W * 2` holds `W`'s draw)
                found.append(f"{module}.{drawn[0]}: {drawn[1]}")
        return sorted(set(found))

    @staticmethod
    def _static_paths(task: TaskDef, effects: Any, named: dict[str, Operand]) -> FilePaths | None:
        """The files a call reads and writes, when its body names each by a literal or a parameter that
        this call binds to a literal string (a default included); None when any is unknown."""
        from dagc.ir.types import Const

        if not effects.file_paths_known:
            return None
        defaults = {p.name: p.default for p in task.sig.params}
        out: dict[str, tuple[str, ...]] = {}
        for mode in ("read", "write"):
            found: list[str] = []
            for term in sorted(effects.file_paths[mode]):
                kind, _, value = term.partition(":")
                if kind == "param":
                    operand = named.get(value)
                    default = defaults.get(value)
                    if isinstance(operand, Const) and isinstance(operand.value, str):
                        value = operand.value
                    elif operand is None and isinstance(default, ast.Constant) and isinstance(default.value, str):
                        value = default.value
                    else:
                        return None
                found.append(os.path.normpath(value))
            if found:
                out[mode] = tuple(sorted(set(found)))
        return FilePaths(out.get("read"), out.get("write"))

    def _config_changed(self, refs: dict[str, None], scope: Scope) -> None:
        """A task may change a config instance: from now on its fields are read from the object at
        run time (glue), not folded from the values it was built with."""
        for ref in refs:
            config = self.cx.config_nodes.get(self.cx.producer.get(ref, ref))
            if config is None:
                continue
            built = self.cx.configs[id(config)][1]
            for key, bound in list(scope.env.items()):
                if isinstance(bound, Static) and bound.value is config:
                    scope.env[key] = built

    def _check_declarations(self, task: TaskDef, effects: Any) -> None:
        """`pure=True` and `readonly=[...]` against what the body shows (once per task)."""
        key = (id(task), "declared")
        if key in self.cx.effect_warned:
            return
        self.cx.effect_warned.add(key)
        options = task.options
        display = task.source.display

        def at(evidence: Any) -> SourceSpan:
            return evidence.span(display)

        task_span = name_span(task.source, task.node)
        if options.pure and options.side_effects:
            self.cx.sink.error("DAGC155", f"task `{task.name}` is declared both pure=True and side_effects=True",
                               task_span, hint="a pure task has no effects; keep one of the two")
        params = set(task.sig.names()) | {p.name for p in task.sig.params}
        for name in options.mutates:
            if name not in params:
                self.cx.sink.error("DAGC121", f"mutates names `{name}`, which is not a parameter of `{task.name}`",
                                   task_span, hint=f"parameters: {', '.join(task.sig.names()) or 'none'}")
        for name in options.readonly:
            if name not in params:
                self.cx.sink.error("DAGC121", f"readonly names `{name}`, which is not a parameter of `{task.name}`",
                                   task_span, hint=f"parameters: {', '.join(task.sig.names()) or 'none'}")
            elif name in effects.definite:
                evidence = effects.definite[name]
                self.cx.sink.warning("DAGC155", f"`{name}` is declared readonly, but `{task.name}` {evidence.reason}",
                                     at(evidence), hint=f"if this changes `{name}`, remove it from readonly=[...]; "
                                     "dagc trusts the declaration and may run this task on a copy",
                                     fix=readonly_without(task, name))
        if options.pure:
            found = next(iter(effects.definite.items()), None)
            if found is not None:
                self.cx.sink.warning("DAGC155", f"task `{task.name}` is declared pure=True, but it {found[1].reason} "
                                     f"(parameter `{found[0]}`)", at(found[1]),
                                     hint="a pure task may be merged, removed or run on a copy; drop pure=True "
                                     "(or list the parameters it only reads in readonly=[...])",
                                     fix=task_option_fix(task, "pure", None))
            elif effects.globals_written:
                name, evidence = next(iter(effects.globals_written.items()))
                self.cx.sink.warning("DAGC155", f"task `{task.name}` is declared pure=True, but it {evidence.reason}",
                                     at(evidence), hint="a pure task may be merged or removed; drop pure=True",
                                     fix=task_option_fix(task, "pure", None))

    def _materialize(self, param: str, operand: Operand, node: Node, scope: Scope, info: ModuleInfo) -> Operand:
        """A list or dict bound to a name in the pipeline and changed by a task is one object in plain
        Python, shared by every later use: make it a value (a glue node) so that it is one here too."""
        expr = self.cx.bound_exprs.get(param)
        if isinstance(operand, Ref) or not isinstance(operand, (Seq, Map)):
            return operand
        if isinstance(operand, Seq) and operand.kind == "tuple":
            return operand  # a tuple cannot change; its items are marked one by one
        if not isinstance(expr, ast.Name):
            if expr is not None and not isinstance(expr, _FRESH_OBJECT_EXPRS):
                self._shared_pipeline_object(expr, node, info, "is part of an object built in the pipeline")
            return operand  # a list or dict written at the call: nobody else sees the change
        value = scope.env.get(expr.id, self.cx.exprs.name_value(expr, scope, info))
        if isinstance(value, Static):
            module_object = next((self.cx.module_objects[i][0] for i in mutable_ids(value.value)
                                  if i in self.cx.module_objects), None)
            if module_object is not None:
                self.cx.sink.error("DAGC154", f"`{expr.id}` is module-level `{module_object}`, and `{node.name}` changes "
                                   "it in place: the pipeline passes module-level values as copies made at compile time",
                                   info.source.span(expr),
                                   hint="have the task change the module-level name itself (the task reads it and dagc "
                                   "keeps every task that touches it in one process), or build the object in a task "
                                   "and pass that task's result")
                raise ExtractError
        holder = self._other_holder(value, scope)
        if holder is not None:
            self._shared_pipeline_object(expr, node, info, f"shares a list or dict with {holder}")
        if self.cx.blocks:
            self.cx.sink.error("DAGC154", f"`{expr.id}` is built in the pipeline and changed in place by "
                               f"`{node.name}` inside a run-time loop or branch", info.source.span(expr),
                               hint=f"build `{expr.id}` in a task (e.g. `{expr.id} = new_list()`), or have the task "
                               "return the new value")
            raise ExtractError
        name = self.cx.node_name(scope.prefix + expr.id + scope.suffix)
        glue = Node(name, "glue", "_0", (operand,), (), (name,), ("list" if isinstance(operand, Seq) else "dict",),
                    span=info.source.span(expr))
        self.cx.add_node(glue)
        for key, bound in list(scope.env.items()):
            if bound is value:
                scope.env[key] = Dyn(Ref(name))
        node.args = tuple(Ref(name) if a == operand and a is operand else a for a in node.args)
        node.kwargs = tuple((k, Ref(name) if v is operand else v) for k, v in node.kwargs)
        return Ref(name)

    def _shared_pipeline_object(self, expr: ast.expr, node: Node, info: ModuleInfo, how: str) -> None:
        """A task changes a list or dict that other pipeline names reach too: dagc tracks a changed
        object as one value, so the other holders would keep the unchanged copy. Refuse it."""
        text = ast.unparse(expr)
        self.cx.sink.error("DAGC154", f"`{text}` {how}, and `{node.name}` changes it in place",
                           info.source.span(expr),
                           hint="build the object in a task (e.g. `state = new_state()` returning the dict) and pass "
                           "that task's result, so that every use sees the change; or pass a name bound to a list "
                           "or dict that no other list or dict of the pipeline holds")
        raise ExtractError

    def _other_holder(self, value: Value | None, scope: Scope) -> str | None:
        """The name of another pipeline binding that shares a list, dict or set with `value` (by identity:
        compile-time containers are real Python objects here), or None."""
        if not isinstance(value, Static):
            return None
        mine = mutable_ids(value.value)
        if not mine:
            return None
        for key, bound in scope.env.items():
            if bound is value:
                continue
            if isinstance(bound, Static) and mine & mutable_ids(bound.value):
                return f"`{key}`"
            if isinstance(bound, Dyn) and mine & self.cx.captured.get(id(bound.operand), (None, set()))[1]:
                return f"`{key}`"
        return None

    def _warn_rng(self, task: TaskDef, effects: Any, node: Node) -> None:
        key = (id(task), "rng")
        if effects.seeds or key in self.cx.effect_warned or self.cx.pipeline_seeds:
            # (a task of the pipeline seeded the generator earlier: the draws follow it, in order, as in plain
            # Python; the seed is the user's, and nothing here would make the numbers differ)
            return
        self.cx.effect_warned.add(key)
        evidence = effects.rng
        self.cx.sink.warning(
            "DAGC150", f"task `{task.name}` draws from the global random number generator without seeding it",
            node.span,
            notes=[Note(evidence.reason, evidence.span(task.source.display))],
            hint="its result depends on the draws made before it in the same process; dagc keeps plain "
            "Python's order by running every such task in one process, one after another. To make it "
            "independent and free to run anywhere, seed inside the task (`torch.manual_seed(seed)`) or "
            "use a generator (`torch.Generator().manual_seed(seed)`, `random.Random(seed)`); "
            "declare `pure=True` if the draws do not affect the result")

    def check_discarded(self, call: ast.expr, info: ModuleInfo) -> None:
        """A task call used as a statement: kept when it has effects (the common case: it updates its
        arguments), else it computes a value nobody reads, which `dce` removes; say so."""
        from dagc.ir.effects import has_effects

        node = self.cx.last_task
        if node is None or not isinstance(call, ast.Call) or has_effects(node) or node.attrs.get(KEEP_ATTR):
            return  # (the common case, checked before the span: computing it costs more)
        if node.effects.seeded:
            return  # it seeds the generator: kept when a later task draws from it (dce says DAGC152 if not)
        if node.span != info.source.span(call) or (id(call), "discarded") in self.cx.effect_warned:
            return
        self.cx.effect_warned.add((id(call), "discarded"))  # once per call site, however often it unrolls
        why = "it is declared pure=True" if node.options.pure else "it changes none of its arguments and " \
              "has no other effect"
        self.cx.sink.warning("DAGC151", f"the result of `{node.name}` is discarded and {why}: `dce` removes this call",
                             node.span, hint="use its result, or mark the task side_effects=True to run it anyway")

    def check_module_reads(self, graph: Graph) -> None:
        """The pipeline body reads module-level values at compile time; a task that changes one at run
        time would make plain Python see a different value (or a changed object) there."""
        if not self.cx.module_reads:
            return
        from dagc.ir.core import region_bodies

        writers: dict[str, str] = {}
        pending = list(graph)
        while pending:
            node = pending.pop(0)
            for name in node.effects.writes:
                writers.setdefault(name, node.name)
            for body in region_bodies(node).values():
                pending.extend(body)
        reads = {name: use_info.source.span(use) for name, (use, use_info) in self.cx.module_reads.items()
                 if name in writers}
        for name, span in sorted(reads.items(), key=lambda item: (item[1].line, item[1].col)):
            if name in writers:
                short = name.rpartition(".")[2]
                self.cx.sink.error("DAGC154", f"the pipeline reads module-level `{short}`, which task `{writers[name]}` "
                                   "changes at run time; dagc reads it when compiling", span,
                                   hint=f"read it in a task and use that task's result (e.g. `def current() -> list: "
                                   f"return list({short})` decorated with @dagc.task)")

    def explain_shared_globals(self, graph: Graph) -> None:
        """Say, once per module-level object, that tasks touching it run in one process and in order
        (the data flow alone would leave them free), at the task that changes it, with the fix."""
        from dagc.ir.effects import state_groups

        if not self.cx.global_writes:
            return  # no task changes a module-level object (the common case: no state analysis to run)

        for group in state_groups(graph):
            names = [c[len("global:"):] for c in group.cells if c.startswith("global:")]
            calls = list(dict.fromkeys(graph.node(n).target.rpartition(":")[2] for n in group.nodes
                                       if graph.node(n).op == "task" and graph.node(n).target))
            if not names or len(calls) < 2 and len(group.nodes) < 2:
                continue
            short = names[0].rpartition(".")[2]
            writer = next((graph.node(n) for n in group.nodes if names[0] in graph.node(n).effects.writes),
                          graph.node(group.nodes[0]))
            shown = ", ".join(f"`{c}`" for c in calls[:4]) + (f" and {len(calls) - 4} more" if len(calls) > 4 else "")
            self.cx.sink.warning(
                "DAGC157", f"{shown} touch module-level `{short}`, which `{writer.name}` may change: dagc runs "
                f"every task touching it in one process, in program order", writer.span,
                notes=[Note(f"it {self.cx.global_writes[names[0]][0]}", self.cx.global_writes[names[0]][1])]
                if names[0] in self.cx.global_writes else [],
                hint=f"if `{short}` is only read, make the change explicit and local: build it in a task and pass it "
                f"as an argument (a task's `readonly=[...]` then frees its readers), or move the change out of "
                f"`{writer.target.rpartition(':')[2] if writer.target else writer.name}`; printing and logging "
                "through it never count")

    def explain_drawn_globals(self, graph: Graph) -> None:
        """Say, once per module-level value drawn at import with no seed, that the tasks reading it run in one
        process (each process importing the module would draw its own), at the line that draws it, with the fix."""
        if not any(n.effects.drawn for n in graph):
            return
        from dagc.ir.effects import state_groups

        for group in state_groups(graph):
            for cell in group.cells:
                if not cell.startswith("drawn:"):
                    continue
                module, _, name = cell[len("drawn:"):].rpartition(".")
                info = self.cx.project.module(module)
                expr = getattr(info.symbols.get(name), "node", None) if info is not None else None
                if info is None or expr is None:
                    continue
                readers = [n for n in group.nodes if any(e.startswith(f"{module}.{name}: ")
                                                         for e in graph.node(n).effects.drawn)]
                shown = ", ".join(f"`{r}`" for r in readers[:4]) + (f" and {len(readers) - 4} more"
                                                                    if len(readers) > 4 else "")
                self.cx.sink.warning(
                    "DAGC165", f"module-level `{name}` holds random numbers drawn when `{module}` is imported, with "
                    f"no seed set before: each process would draw its own, so {shown}, which read it, run in one "
                    "process, in order", info.source.span(expr),
                    hint=f"seed the generator above this line (`torch.manual_seed(0)`, `np.random.seed(0)`) so that "
                    f"every process draws the same `{name}`, or build it in a task and pass it to its readers")

    def explain_file_order(self, graph: Graph) -> None:
        """Say, once per task that writes files at paths dagc cannot name at its call, that every later task
        touching files waits for it (they might read or write the same file), with the fix."""
        if not self.cx.unnamed_writes:
            return
        from dagc.ir.effects import node_effects

        touching = [n for n in graph if n.op != "transfer" and node_effects(n).files is not None]
        for index, node in enumerate(touching):
            found = self.cx.unnamed_writes.get(node.name)
            later = [n.name for n in touching[index + 1:]]
            if found is None or not later:
                continue
            reason, where = found
            shown = ", ".join(f"`{n}`" for n in later[:4]) + (f" and {len(later) - 4} more" if len(later) > 4 else "")
            task = node.target.rpartition(":")[2] if node.target else node.name
            self.cx.sink.warning(
                "DAGC164", f"`{node.name}` writes files whose paths dagc cannot name at this call, so every later "
                f"task touching files runs after it, in program order ({shown})", node.span,
                notes=[Note(f"`{task}` {reason}", where)],
                hint="pass each path as an argument bound to a string at the call (`save(model, path=\"a.pt\")`: "
                     "tasks writing different paths then stay independent), or declare them: "
                     "`@dagc.task(writes=[...])`")
            return  # once: the first such writer orders everything after it

    def explain_joined_state(self, graph: Graph) -> None:
        """Say where one task joins pieces of state that tasks change in place (it reads two frames that two
        other tasks changed): a task runs in one process, so every task touching any of them does, in order,
        though the data flow would leave them free. Once per such group, at the joining task, with the fix."""
        from dagc.ir.effects import state_groups, state_touches

        groups = [g for g in state_groups(graph)
                  if sum(1 for c in g.cells if not c.startswith(("global:", "rng:"))) > 1]
        if not groups:
            return
        touches = state_touches(graph)
        for group in groups:
            cells = [c for c in group.cells if not c.startswith(("global:", "rng:"))]
            link = next((graph.node(n) for n in group.nodes if sum(c in cells for c in touches.get(n, ())) > 1), None)
            changers = [n for n in group.nodes if n in self.cx.mutators]
            if link is None or len(changers) < 2:
                continue
            shown = ", ".join(f"`{n}`" for n in group.nodes[:5]) + (
                f" and {len(group.nodes) - 5} more" if len(group.nodes) > 5 else "")
            named = " and ".join(f"`{n}`" for n in changers[:2]) + (" and others" if len(changers) > 2 else "")
            notes = [Note(f"`{n}` changes its argument `{param}` in place: {why}", where)
                     for n in changers[:3] for param, why, where in self.cx.mutators[n][:1]]
            self.cx.sink.warning(
                "DAGC159", f"`{link.name}` reads objects that {named} change in place: one task runs in one "
                f"process, so the {len(group.nodes)} tasks touching any of them run in one process, in program "
                f"order ({shown})", link.span, notes=notes,
                hint="have the tasks that change them return new objects instead (a first line `df = df.copy()` "
                     "makes `df` the task's own), or declare `readonly=[...]` on a task that only reads its argument")

    def check_state(self, graph: Graph) -> None:
        """Each rank of a multi-rank task is its own process: it cannot share objects with other tasks."""
        from dagc.ir.effects import state_groups

        if all(node.options.ranks == 1 for node in graph):
            return
        for group in state_groups(graph):
            for name in group.nodes:
                node = graph.node(name)
                if node.options.ranks > 1:
                    task = node.target.rpartition(":")[2] if node.target else name
                    if group.name == "rng:global":
                        hint = (f"each rank is its own process with its own generator: seed inside `{task}` (e.g. "
                                "`torch.manual_seed(seed)` as its first line) so that every rank starts from the "
                                "same state, or draw from a generator you make there")
                    else:
                        params = [p for p, operand in (self.cx.bound_args.get(name) or {}).items()
                                  if any(True for _ in iter_refs(operand))]
                        readonly = f"`@dagc.task(readonly={params!r})`" if params else "`readonly=[...]`"
                        hint = (f"if `{task}` only reads {', '.join(f'`{p}`' for p in params) or 'its arguments'}, "
                                f"declare it: {readonly}; otherwise each rank is its own process: give it a copy "
                                "taken by a task declared pure=True (e.g. `weights = snapshot(model)` returning "
                                "`copy.deepcopy(model.state_dict())`), and have it return its result (rank 0's "
                                "value) instead of changing an argument")
                    self.cx.sink.error(
                        "DAGC304", f"multi-rank task `{name}` touches state shared with other tasks "
                        f"(`{group.name}`: {group.why})", node.span, hint=hint)

    def check_reads(self) -> None:
        # the directories written files are in (`out/model.pt`: `out`), but for the script's own directory: a
        # pipeline writing `HERE/runs` (a directory, `writes=["{out_dir}"]`) reads the data files beside it there
        home = os.path.dirname(os.path.abspath(self.cx.project.entry))
        produced_dirs = {os.path.dirname(p) for p in self.cx.writers} - {home, "", "."}
        for path, reader, span in self.cx.reads:
            written = self.cx.written_as(path)
            writer = self.cx.writers[written] if written is not None else None
            if writer is not None:
                self.cx.sink.error("DAGC127", f"task `{reader}` reads `{path}` before `{writer[0]}` writes it",
                                   span, notes=[Note(f"`{writer[0]}` writes it here", writer[1])],
                                   hint="call the writing task first")
            elif os.path.dirname(path) in produced_dirs:
                close = sorted(p for p in self.cx.writers if os.path.dirname(p) == os.path.dirname(path))
                self.cx.sink.error("DAGC127", f"task `{reader}` reads `{path}`, which no task writes",
                                   span, hint=f"the pipeline writes into this directory: {', '.join(close[:5])}; "
                                   "declare the writer with writes=[...] or fix the path")
