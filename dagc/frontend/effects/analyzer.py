"""The effect summaries of tasks, helpers and methods, computed once each and kept."""

from __future__ import annotations

import ast

from dagc.frontend import library as lib
from dagc.frontend.effects.scan import FunctionScan
from dagc.frontend.effects.summary import Effects, Evidence, summary_key
from dagc.frontend.modules import ModuleInfo, Project, TaskDef
from dagc.frontend.values import GlobalValue, module_qualified, value_kind


class EffectAnalyzer:
    """Infers and caches the effects of tasks and of the user's helper functions they call."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._cache: dict[int, Effects] = {}
        self._methods: dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo, bool]]] = {}
        self._indexed = -1
        self._kinds: dict[int, GlobalValue] = {}
        self._draws: dict[int, bool] = {}
        self._init_draws: dict[int, bool] = {}
        self._drawn: dict[tuple[str, str], tuple[str, str] | None] = {}
        self.code_of: dict[int, str] = {}  # id(function node) -> `module:function` / `module:Class`
        # the user's call graph, walked depth first as summaries are asked for (Tarjan's strongly connected
        # components, found on the fly): a function is summarised with its whole component (mutual recursion)
        self._order: dict[int, int] = {}  # functions being summarised -> their depth-first number
        self._numbered = 0
        self._low: dict[int, int] = {}  # the smallest number reachable from each through unfinished calls
        self._component_stack: list[int] = []  # functions not yet finished, in depth-first order
        self._scanning: list[int] = []  # the functions whose bodies are being scanned, innermost last
        self._recursive: set[int] = set()  # functions calling themselves (a component of one that needs a fixpoint)
        self._pending: dict[int, tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo]] = {}
        self._partial: dict[int, Effects] = {}  # the summary so far of each unfinished function
        self._typed: dict[tuple[int, frozenset[tuple[str, str]]], Effects] = {}  # of_task with the callers' types
        self._class_bodies: dict[int, ast.FunctionDef] = {}  # id(class node) -> its statements outside methods

    def of_task(self, task: TaskDef, types: frozenset[tuple[str, str]] = frozenset()) -> Effects:
        """`task`'s effects; `types`: (parameter, type) for parameters without an annotation, taken from what a
        call passes (the producing task's return type): a loader, model or optimizer is then seen as one."""
        info = self.project.module(task.home or task.module)  # (an inherited method reads its own module's names)
        if info is None and task.dialect is not None:
            # a framework's own task (KFP's `dsl.importer`), run by dagc.runtime.dialects: it changes nothing,
            # and the files it reads are traced at run time (dagc.runtime.filetrace)
            return Effects()
        if info is None:  # pragma: no cover - a task always comes from a loaded module
            return Effects(world=Evidence(task.node.lineno, task.node.col_offset, "unknown module"))
        if types:
            key = (id(task.node), types)
            found = self._typed.get(key)
            if found is None:
                found = self._typed[key] = FunctionScan(self, task.node, info, dict(types)).run()
            return found
        return self.of_function(task.node, info)

    def of_class_body(self, cls: ast.ClassDef, info: ModuleInfo) -> Effects:
        """The effects of what `cls`'s body runs outside its methods (its attributes' values: a Metaflow flow's
        `Parameter(default=...)` and `Config(default=...)` among them), read as a function's body: its `reaches`
        are the module-level code and values a class's values come from."""
        fn = self._class_bodies.get(id(cls))
        if fn is None:
            body = [s for s in cls.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            arguments = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                      kwarg=None, defaults=[])
            fn = ast.copy_location(ast.FunctionDef(cls.name, arguments, body or [ast.Pass()], [], None, None), cls)
            ast.fix_missing_locations(fn)
            self._class_bodies[id(cls)] = fn
        return self.of_function(fn, info)

    def of_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, info: ModuleInfo) -> Effects:
        key = id(fn)
        found = self._cache.get(key)
        if found is not None:
            return found
        if key in self._order:  # a call back into an unfinished component: its summary so far
            self._calls_unfinished(key)
            return self._partial.get(key, Effects())
        self._order[key] = self._low[key] = self._numbered
        self._numbered += 1
        self._component_stack.append(key)
        self._pending[key] = (fn, info)
        try:
            effects = self._scan(key, fn, info)
            self._partial[key] = effects
            if self._low[key] == self._order[key]:  # the root of a component: every member is now known
                return self._finish(self._component_stack.index(key))[key]
        except BaseException:  # (too deep a body: the caller reports it; nothing half-done is kept)
            if key in self._component_stack:
                self._forget(self._component_stack[self._component_stack.index(key):])
            raise
        if self._scanning:  # a member of a component whose root is still being scanned
            caller = self._scanning[-1]
            self._low[caller] = min(self._low[caller], self._low[key])
        return effects

    def _calls_unfinished(self, key: int) -> None:
        if not self._scanning:
            return
        caller = self._scanning[-1]
        self._low[caller] = min(self._low[caller], self._order[key])
        if caller == key:
            self._recursive.add(key)

    def _scan(self, key: int, fn: ast.FunctionDef | ast.AsyncFunctionDef, info: ModuleInfo) -> Effects:
        self._scanning.append(key)
        try:
            return FunctionScan(self, fn, info).run()
        finally:
            self._scanning.pop()

    def _finish(self, start: int) -> dict[int, Effects]:
        """Summaries of one strongly connected component of the call graph (the functions on the component
        stack from `start`): scanned again, each with the others' summaries so far, until none changes (f
        calls g calls f: each gets what the other does through the arguments it passes); not stable after a
        few rounds: the worst is assumed for all."""
        members = self._component_stack[start:]
        current = {m: self._partial[m] for m in members}
        base = len(self._component_stack)
        if len(members) > 1 or members[0] in self._recursive:
            for member in members:
                self._partial[member] = current[member]
            for _ in range(max(5, 2 * len(members) + 3)):
                changed = False
                for member in members:  # (each scan sees the summaries of this round's earlier scans)
                    again = self._scan(member, *self._pending[member])
                    if summary_key(again) != summary_key(current[member]):
                        current[member] = self._partial[member] = again
                        changed = True
                if not changed:
                    break
            else:
                current = {m: Effects(world=Evidence(self._pending[m][0].lineno, self._pending[m][0].col_offset,
                                                     "recursive call")) for m in members}
        # (a function first reached by a scan again and calling back into the component: its summary so far)
        current.update({m: self._partial[m] for m in self._component_stack[base:]})
        members = self._component_stack[start:]
        self._forget(members)
        self._cache.update(current)
        return current

    def _forget(self, members: list[int]) -> None:
        """Take finished (or abandoned) functions off the component stack and out of the walk's tables."""
        del self._component_stack[len(self._component_stack) - len(members):]
        for member in members:
            for table in (self._order, self._low, self._pending, self._partial):
                table.pop(member, None)
            self._recursive.discard(member)

    def methods_named(self, attr: str) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo, bool]]:
        """Every method called `attr` of a class in the user's loaded modules, with its module and whether
        it is a static method (class hierarchy analysis: a call `x.attr()` on an object of unknown class
        may reach any of them)."""
        modules = [m for m in self.project.modules.values() if m is not None]
        if len(modules) != self._indexed:
            self._methods = {}
            for module in modules:
                for stmt in module.source.tree.body:
                    if not isinstance(stmt, ast.ClassDef):
                        continue
                    for item in stmt.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("__"):
                            static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in item.decorator_list)
                            self._methods.setdefault(item.name, []).append((item, module, static))
                            self.code_of[id(item)] = f"{module.name}:{stmt.name}"
            self._indexed = len(modules)
        return self._methods.get(attr, [])

    def forward_draws(self, cls: ast.ClassDef, info: ModuleInfo, _depth: int = 0) -> bool:
        """Whether calling an instance of the user's `torch.nn.Module` subclass `cls` may draw random numbers:
        its `__init__` builds a layer whose forward draws (dropout), or one of the user's own that does."""
        key = id(cls)
        if key in self._draws:
            return self._draws[key]
        self._draws[key] = False  # (a class building itself: no)
        found = False
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        for node in ast.walk(init) if init is not None and _depth < 10 else ():
            if not isinstance(node, ast.Call):
                continue
            name = module_qualified(node.func, info)
            layer = lib.catalogue().layer(name) if name and name.startswith("torch.nn.") else None
            if layer is not None and layer.forward_rng:
                found = True
                break
            if isinstance(node.func, ast.Name):
                symbol = self.project.lookup(info, node.func.id)
                inner = getattr(symbol, "node", None)
                if isinstance(inner, ast.ClassDef) and self.forward_draws(inner, info, _depth + 1):
                    found = True
                    break
        self._draws[key] = found
        return found

    def init_draws(self, cls: ast.ClassDef, info: ModuleInfo, _depth: int = 0) -> bool:
        """Whether building an instance of the user's class `cls` draws random numbers: its `__init__` builds a
        layer that draws its initial weights (`nn.Linear`), calls a drawing function, or builds such a class."""
        key = id(cls)
        if key in self._init_draws:
            return self._init_draws[key]
        self._init_draws[key] = False  # (a class building itself: no)
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        found = init is not None and _depth < 10 and self._expression_draws(init, info, _depth + 1)
        self._init_draws[key] = found
        return found

    def _expression_draws(self, tree: ast.AST, info: ModuleInfo, depth: int) -> bool:
        """Whether evaluating `tree` (a module-level expression, or a class's `__init__`) may draw from a global
        random number generator: a drawing function, a layer drawing its initial weights, a user class whose
        `__init__` does."""
        for node in _evaluated(tree):
            if not isinstance(node, ast.Call) or any(k.arg == "generator" for k in node.keywords):
                continue
            name = module_qualified(node.func, info)
            if name is not None:
                if name in lib.RNG_EXEMPT or name in lib.SEEDING:
                    continue
                if name in lib.RNG_FUNCTIONS or name.startswith(lib.RNG_PREFIXES):
                    return True
                if name.startswith("torch."):
                    catalogue = lib.catalogue()
                    facts = catalogue.function(name)
                    layer = catalogue.layer(name)
                    if facts is not None and facts.rng or layer is not None and layer.init_rng:
                        return True
            if isinstance(node.func, ast.Name):
                symbol = self.project.lookup(info, node.func.id)
                inner = getattr(symbol, "node", None)
                if isinstance(inner, ast.ClassDef) and self.init_draws(inner, info, depth):
                    return True
        return False

    def drawn_at_import(self, info: ModuleInfo, name: str, _depth: int = 0) -> tuple[str, str] | None:
        """(the name drawn, why) when module-level name `name` of `info` holds random numbers drawn when the
        module is imported with no seed set before (`W = torch.randn(3)`, `model = Net()` built of `nn.Linear`
        layers; `W2 = W * 2` holds `W`'s draw), or None. Every process that imports the module draws its own:
        tasks reading it in different processes would read different values where the plain run reads one."""
        key = (info.name, name)
        if key in self._drawn:
            return self._drawn[key]
        self._drawn[key] = None
        symbol = info.symbols.get(name)
        expr = getattr(symbol, "node", None)
        found = None
        if _depth < 20 and isinstance(expr, ast.expr) and not self._seeded_before(info, expr.lineno):
            where = f"{info.source.display}:{expr.lineno}"
            if self._expression_draws(expr, info, 0):
                found = name, f"`{name}` is drawn when `{info.name}` is imported, with no seed set before ({where})"
            else:
                for node in ast.walk(expr):
                    inner = self.drawn_at_import(info, node.id, _depth + 1) \
                        if isinstance(node, ast.Name) and node.id != name else None
                    if inner is not None:
                        found = inner[0], f"`{name}` is computed from `{inner[0]}`, which {inner[1].split(' is ', 1)[1]}"
                        break
        self._drawn[key] = found
        return found

    @staticmethod
    def _seeded_before(info: ModuleInfo, line: int) -> bool:
        """Whether a top-level statement of `info` before `line` seeds a global generator (`torch.manual_seed(0)`):
        every process then draws the same numbers at import."""
        for stmt in info.source.tree.body:
            if stmt.lineno >= line:
                return False
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                called = module_qualified(stmt.value.func, info)
                if called is not None and called in lib.SEEDING:
                    return True
        return False

    def value_kind(self, expr: ast.AST, info: ModuleInfo, _depth: int = 0) -> GlobalValue:
        """What a module-level value is, from the expression that builds it (never run)."""
        key = id(expr)
        found = self._kinds.get(key)
        if found is None:
            found = self._kinds[key] = value_kind(self, expr, info, _depth)
        return found


def _evaluated(tree: ast.AST) -> list[ast.AST]:
    """The nodes of `tree` that run when it does: not the bodies of the lambdas, functions and classes it
    defines (`aug = lambda x: x + torch.randn(1)` draws when called, not at import)."""
    found: list[ast.AST] = []
    pending = [] if isinstance(tree, ast.Lambda) else [tree]  # (a `def`'s body is walked: a class's `__init__`)
    while pending:
        node = pending.pop()
        found.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                pending.append(child)
    return found
