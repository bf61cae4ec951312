"""Effect inference: what a task's body may do besides computing its result, read off its source.

Plain Python passes references, so a task may update its arguments in place (`model.train()`,
`opt.step()`, `log.append(x)`), touch module-level state, draw from the global random number
generators, or act on the world (print, write files). The compiler may remove, merge, reorder or
move a call only when its effects allow it, so inference is conservative: when unsure, it assumes
the effect. Declarations relax it: `pure=True` (no effects at all; the result depends only on the
arguments) and `readonly=["param", ...]` (the task never changes those arguments).

Evidence that a parameter may be mutated, for a parameter `p` or any local that may alias it (a
name assigned from an expression that mentions it, a loop variable over it):
  * assignment into it: `p.x = …`, `p[k] = …`, `del p[k]`, `p += …`, `p.x += …`;
  * a method call on it that is not known to leave its receiver alone (`p.append`, `p.step()`,
    `p.train()`, any method ending in `_`, any method dagc does not know);
  * calling it (`model(x)` runs forward hooks and updates running statistics);
  * passing it to a function that is not known to leave its arguments alone (user helpers are
    analysed the same way, recursively; library functions are trusted only from a short list).
The world: calls of `print`, `open`, `torch.save`, `logging`, `os`, `shutil`, `subprocess`, and any
call dagc does not know. The global RNG: `random.*`, `numpy.random.*`, `torch.rand*`/`randn*`/…
without `generator=`, and constructors of `torch.nn` layers that initialise weights.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from dagc.frontend import library as lib
from dagc.frontend.modules import Constant, ImportedModule, ModuleInfo, Opaque, Project, TaskDef
from dagc.frontend.values import (
    IMMUTABLE,
    GlobalValue,
    is_frozen_class,
    is_immutable_constant,
    module_qualified,
    value_kind,
)

__all__ = ["Effects", "Evidence", "EffectAnalyzer", "SCALAR_TYPES", "is_scalar_type"]


@dataclass(frozen=True)
class Evidence:
    """Where and why an effect was inferred (1-based line, 0-based column of the task's file)."""

    line: int
    col: int
    reason: str


@dataclass
class Effects:
    """What one function may do. `mutates` maps parameter names to the first evidence found."""

    mutates: dict[str, Evidence] = field(default_factory=dict)
    definite: dict[str, Evidence] = field(default_factory=dict)  # certain changes (checked against declarations)
    world: Evidence | None = None
    rng: Evidence | None = None
    globals_written: dict[str, Evidence] = field(default_factory=dict)
    globals_read: set[str] = field(default_factory=set)
    seeds: bool = False  # seeds a global generator itself, so its draws do not depend on earlier tasks
    # the file system: tasks that write files are ordered after earlier readers and writers, readers
    # after earlier writers (a checkpoint saved by one task and loaded by the next)
    file_read: Evidence | None = None
    file_write: Evidence | None = None
    # which files, where the path is known: "param:NAME" (the task's parameter) or "const:PATH"; any access
    # whose path is not known makes `file_paths_known` False (then every file access is ordered)
    file_paths: dict[str, set[str]] = field(default_factory=lambda: {"read": set(), "write": set()})
    file_paths_known: bool = True
    # prints, logs, progress bars, metric writers: kept by dce, but never state and never a reason not to cache
    output: Evidence | None = None
    # the user's functions and classes the body reaches (`module:function`, `module:Class`): the code whose
    # source the run-time fingerprint covers (editing any of them recomputes the task)
    reaches: set[str] = field(default_factory=set)

    @property
    def is_pure(self) -> bool:
        return not (self.mutates or self.world or self.rng or self.globals_written)


SCALAR_TYPES = frozenset({"int", "float", "str", "bool", "None", "bytes", "complex", "Literal"})


def is_scalar_type(annotation: str | None) -> bool:
    """An annotation whose values cannot share mutable objects with anything (int, str, tuple[int, …])."""
    if annotation is None:
        return False
    text = annotation.replace(" ", "")
    if text in SCALAR_TYPES:
        return True
    for prefix in ("tuple[", "Tuple[", "typing.Tuple[", "Optional[", "typing.Optional[", "Literal[", "typing.Literal["):
        if text.startswith(prefix) and text.endswith("]"):
            if prefix.startswith(("Literal", "typing.Literal")):
                return True
            inner = text[len(prefix):-1]
            return all(is_scalar_type(part) for part in _split_args(inner) if part != "...")
    if "|" in text:
        return all(is_scalar_type(part) for part in text.split("|"))
    return False


def _split_args(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _path_root(expr: ast.expr | None) -> str | None:
    """`p` for `p`, `p.a`, `p[k].b`: the name an attribute/item path starts from, else None."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _is_data_annotation(annotation: str | None) -> bool:
    """A parameter annotated as a tensor, an array or a container of them (not as a module)."""
    if annotation is None or "Module" in annotation:
        return False
    return any(word in annotation for word in ("Tensor", "ndarray", "array", "DataFrame", "Series"))



def _summary(effects: Effects) -> tuple:
    """What a fixpoint compares: which effects, not where they were found."""
    return (frozenset(effects.mutates), effects.world is not None, effects.rng is not None,
            frozenset(effects.globals_written), frozenset(effects.globals_read), effects.seeds,
            effects.file_read is not None, effects.file_write is not None, effects.output is not None,
            effects.file_paths_known, frozenset(effects.file_paths["read"]), frozenset(effects.file_paths["write"]))


class EffectAnalyzer:
    """Infers and caches the effects of tasks and of the user's helper functions they call."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._cache: dict[int, Effects] = {}
        self._active: set[int] = set()
        self._methods: dict[str, list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo, bool]]] = {}
        self._indexed = -1
        self._kinds: dict[int, GlobalValue] = {}
        self._draws: dict[int, bool] = {}
        self.code_of: dict[int, str] = {}  # id(function node) -> `module:function` / `module:Class`
        self._recursive: set[int] = set()  # functions found calling themselves during their own scan
        self._partial: dict[int, Effects] = {}  # their summary so far

    def of_task(self, task: TaskDef) -> Effects:
        info = self.project.module(task.module)
        if info is None:  # pragma: no cover - a task always comes from a loaded module
            return Effects(world=Evidence(task.node.lineno, task.node.col_offset, "unknown module"))
        return self.of_function(task.node, info)

    def of_function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, info: ModuleInfo) -> Effects:
        key = id(fn)
        found = self._cache.get(key)
        if found is not None:
            return found
        if key in self._active:  # recursion: the summary so far (a fixpoint below completes it)
            self._recursive.add(key)
            return self._partial.get(key, Effects())
        self._active.add(key)
        try:
            effects = _FunctionScan(self, fn, info).run()
            for _ in range(5):  # a recursive function: scan again with its own summary until it is stable
                if key not in self._recursive:
                    break
                self._recursive.discard(key)
                self._partial[key] = effects
                again = _FunctionScan(self, fn, info).run()
                if _summary(again) == _summary(effects):
                    break
                effects = again
            else:  # not stable: assume the worst
                effects = Effects(world=Evidence(fn.lineno, fn.col_offset, "recursive call"))
        finally:
            self._active.discard(key)
            self._partial.pop(key, None)
        self._cache[key] = effects
        return effects

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

    def value_kind(self, expr: ast.AST, info: ModuleInfo, _depth: int = 0) -> GlobalValue:
        """What a module-level value is, from the expression that builds it (never run)."""
        key = id(expr)
        found = self._kinds.get(key)
        if found is None:
            found = self._kinds[key] = value_kind(self, expr, info, _depth)
        return found


class _FunctionScan:
    """One pass over a function body: which locals may alias which parameters, then the evidence."""

    def __init__(self, analyzer: EffectAnalyzer, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                 info: ModuleInfo) -> None:
        self.analyzer = analyzer
        self.fn = fn
        self.info = info
        self.effects = Effects()
        args = fn.args
        self.params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        if args.vararg:
            self.params.append(args.vararg.arg)
        if args.kwarg:
            self.params.append(args.kwarg.arg)
        annotations = {a.arg: ast.unparse(a.annotation) if a.annotation is not None else None
                       for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        self.annotations = annotations
        # name -> parameters it may alias (scalars cannot be changed in place, so they alias nothing)
        # (nor do instances of the user's frozen dataclasses and NamedTuples)
        self.alias: dict[str, set[str]] = {p: {p} for p in self.params if not is_scalar_type(annotations.get(p))
                                           and not self._frozen_annotation(annotations.get(p))}
        # the body only: decorators, annotations and defaults run once, when the function is defined
        self.body_nodes = [n for stmt in fn.body for n in ast.walk(stmt)]
        self.local_names = self._locals()
        self.new_containers = self._new_containers()
        self.global_decl = {n for node in self.body_nodes if isinstance(node, ast.Global) for n in node.names}
        # names rebound in the body (a parameter rebound no longer names what the caller passed)
        self.rebound = {n.id for n in self.body_nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        # `with open(...) as f` / `f = open(...)`: accesses through `f` are the `open`'s
        self.file_objects: set[str] = set()
        for node in self.body_nodes:
            opened: ast.expr | None = None
            target: ast.expr | None = None
            if isinstance(node, ast.withitem):
                opened, target = node.context_expr, node.optional_vars
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                opened, target = node.value, node.targets[0]
            if isinstance(opened, ast.Call) and isinstance(opened.func, ast.Name) and opened.func.id == "open" \
                    and isinstance(target, ast.Name):
                self.file_objects.add(target.id)
        # `import random` / `from random import choice` inside the body (Metaflow steps, Kubeflow components)
        self.local_imports: dict[str, str] = {}
        for node in self.body_nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.local_imports[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        self.local_imports[head] = head
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    self.local_imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        # locals every assignment of which builds a layer that holds no state (`loss_fn = nn.MSELoss()`)
        self.stateless_locals = self._stateless_locals()

    def _stateless_locals(self) -> set[str]:
        found: dict[str, bool] = {}
        for node in self.body_nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        layer = None
                        if isinstance(node.value, ast.Call):
                            name = self.qualified(node.value.func)
                            layer = lib.catalogue().layer(name) if name and name.startswith("torch.nn.") else None
                        found[target.id] = found.get(target.id, True) and layer is not None and layer.stateless
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in found:
                found[node.id] = False
        return {name for name, ok in found.items() if ok}

    def _draws_when_iterated(self, iterable: ast.expr) -> bool:
        """A `torch.utils.data.DataLoader` given no `generator=`: a parameter annotated as one, or a local
        built by one in this body (through `enumerate(...)`, `iter(...)`, `zip(...)` and `tqdm(...)` too)."""
        while isinstance(iterable, ast.Call) and iterable.args and isinstance(iterable.func, ast.Name) \
                and iterable.func.id in ("enumerate", "iter", "zip", "tqdm", "reversed"):
            iterable = iterable.args[0]
        if isinstance(iterable, ast.Call):
            return self._builds_loader(iterable)
        if not isinstance(iterable, ast.Name):
            return False
        if iterable.id in self.params:
            annotation = self.annotations.get(iterable.id) or ""
            if "DataLoader" in annotation:
                return True
        built = [n.value for n in self.body_nodes if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == iterable.id for t in n.targets)]
        return any(isinstance(v, ast.Call) and self._builds_loader(v) for v in built)

    def _builds_loader(self, call: ast.Call) -> bool:
        name = self.qualified(call.func)
        return name in ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader") and not any(
            k.arg == "generator" for k in call.keywords)

    def _evaluation_only(self, name: str) -> bool:
        """The body puts `name` in evaluation mode (`model.eval()`) and never in training mode: its
        dropout layers draw nothing."""
        modes = {node.func.attr for node in self.body_nodes if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                 and node.func.value.id == name and node.func.attr in ("eval", "train")}
        return modes == {"eval"}

    def _user_class(self, annotation: str | None) -> tuple[ast.ClassDef, ModuleInfo] | None:
        """The user's class an annotation names (`model: Net`), with its module."""
        if not annotation or not annotation.isidentifier():
            return None
        symbol = self.analyzer.project.lookup(self.info, annotation)
        node = getattr(symbol, "node", None)
        if not isinstance(node, ast.ClassDef):
            return None
        owner = next((m for m in _loaded_modules(self.analyzer.project) if m.symbols.get(node.name) is symbol),
                     self.info)
        return node, owner

    def _frozen_annotation(self, annotation: str | None) -> bool:
        if not annotation or not annotation.isidentifier():
            return False
        return is_frozen_class(self.analyzer.project, self.info, ast.Name(annotation, ast.Load()))

    # ---- aliasing ---------------------------------------------------------------------------------
    def _locals(self) -> set[str]:
        names: set[str] = set(self.params)
        for node in self.body_nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not self.fn:
                names.add(node.name)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.arg):
                names.add(node.arg)
        return names

    def _new_containers(self) -> set[str]:
        """Locals every assignment of which builds a new list/dict/set (`dict(x)`, `[...]`, `x.copy()`):
        storing into them changes no argument, though their items may still be shared."""
        fresh: dict[str, bool] = {}
        for node in self.body_nodes:
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.withitem, ast.comprehension, ast.NamedExpr)):
                target = getattr(node, "target", None) or getattr(node, "optional_vars", None)
                for sub in ast.walk(target) if target is not None else ():
                    if isinstance(sub, ast.Name):
                        fresh[sub.id] = False
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    fresh[target.id] = fresh.get(target.id, True) and _builds_container(value)
                else:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            fresh[sub.id] = False
        return {name for name, is_new in fresh.items() if is_new and name not in self.params}

    def roots(self, expr: ast.AST | None) -> set[str]:
        """Parameters whose objects `expr`'s value may share (the may-alias set)."""
        if expr is None:
            return set()
        if isinstance(expr, ast.Name):
            if expr.id in self.alias:
                return set(self.alias[expr.id])
            if self._is_global(expr.id):
                return {f"global:{self.info.name}.{expr.id}"}
            return set()
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and (value := self._global_value(expr.value.id)) is not None \
                    and value.kind == "namespace":
                return set()  # `args.lr`: a value parsed from the command line, not the namespace
            return set() if expr.attr in lib.SCALAR_ATTRS else self.roots(expr.value)
        if isinstance(expr, ast.Subscript):
            if self._immutable_items(expr.value):
                return set()  # `CFG["dim"]`: an int read from a module-level config is not the config
            return self.roots(expr.value)  # an item is part of its container; the key is not
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in lib.FRESH_METHODS:
                return set()
            if isinstance(func, ast.Attribute) and func.attr in ("get", "values", "items", "keys", "copy") \
                    and self._immutable_items(func.value):
                return set()
            if isinstance(func, ast.Name) and (value := self._global_value(func.id)) is not None \
                    and value.kind == "layer" and value.layer is not None and value.layer.stateless:
                return set()  # `criterion(out, y)`: a loss or activation computes a new tensor
            if isinstance(func, ast.Name) and func.id in self.stateless_locals:
                return set()  # `loss_fn = nn.CrossEntropyLoss()` built here: its result is a new tensor
            if isinstance(func, ast.Name) and func.id in lib.FRESH_BUILTINS and not self._shadowed(func.id):
                return set()
            name = self.qualified(func)
            if name is not None and self._fresh_library_result(name):
                return set()
            held = lib.catalogue().held_arguments(name) if name is not None else None
            if held is not None:  # `SGD(model.parameters(), lr=config["lr"])` holds the parameters only
                positions = {i for i, _ in held}
                names = {n for _, n in held}
                out = set()
                for i, arg in enumerate(expr.args):
                    if i in positions or isinstance(arg, ast.Starred):
                        out |= self.roots(arg)
                for k in expr.keywords:
                    if k.arg is None or k.arg in names:
                        out |= self.roots(k.value)
                return out
            out = self.roots(func.value) if isinstance(func, ast.Attribute) and name is None else set()
            for arg in (*expr.args, *(k.value for k in expr.keywords)):
                out |= self.roots(arg)
            return out
        if isinstance(expr, (ast.Constant, ast.JoinedStr, ast.Compare, ast.Lambda)):
            return set()
        if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            out = set()
            for gen in expr.generators:
                out |= self.roots(gen.iter)
            for part in (getattr(expr, "elt", None), getattr(expr, "key", None), getattr(expr, "value", None)):
                out |= self.roots(part)
            return out
        out = set()
        for child in ast.iter_child_nodes(expr):
            if isinstance(child, ast.expr):
                out |= self.roots(child)
        return out

    def _global_value(self, name: str) -> GlobalValue | None:
        """What module-level name `name` holds, if it is one (not a local, not a function or class)."""
        if name in self.global_decl:
            return GlobalValue("mutable")
        if name in self.local_names:
            return None
        symbol = self.info.symbols.get(name)
        if isinstance(symbol, Constant):
            return GlobalValue("container") if isinstance(symbol.value, (list, dict, set)) else IMMUTABLE
        if isinstance(symbol, Opaque) and symbol.kind == "value":
            return self.analyzer.value_kind(symbol.node, self.info)
        return None

    def _is_global(self, name: str) -> bool:
        """A module-level name whose object a task could change: state when some task does. Numbers,
        strings, devices, frozen configs, loggers and layers that hold nothing are never state."""
        value = self._global_value(name)
        return value is not None and value.is_state

    def _immutable_items(self, expr: ast.expr) -> bool:
        """`expr` is a module-level literal list or dict whose items are all immutable (numbers,
        strings, tuples of them): reading an item yields no object a task could change."""
        if not isinstance(expr, ast.Name) or expr.id in self.local_names or expr.id in self.global_decl:
            return False
        symbol = self.info.symbols.get(expr.id)
        if not isinstance(symbol, Constant) or not isinstance(symbol.value, (list, dict)):
            return False
        items = symbol.value.values() if isinstance(symbol.value, dict) else symbol.value
        return all(is_immutable_constant(v) for v in items)

    def _shadowed(self, name: str) -> bool:
        return name in self.local_names or name in self.info.symbols

    def _bind(self, target: ast.AST, roots: set[str]) -> bool:
        changed = False
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and roots:
                before = self.alias.setdefault(node.id, set())
                if not roots <= before:
                    before |= roots
                    changed = True
        return changed

    def _propagate(self) -> None:
        """Fixpoint of the may-alias sets over assignments, loops, `with` and comprehensions."""
        for _ in range(20):
            changed = False
            for node in self.body_nodes:
                if isinstance(node, ast.Assign):
                    roots = self.roots(node.value)
                    changed |= any(self._bind(t, roots) for t in node.targets)
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    changed |= self._bind(node.target, self.roots(node.value))
                elif isinstance(node, (ast.For, ast.AsyncFor)):
                    changed |= self._bind(node.target, self.roots(node.iter))
                elif isinstance(node, ast.comprehension):
                    changed |= self._bind(node.target, self.roots(node.iter))
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    changed |= self._bind(node.optional_vars, self.roots(node.context_expr))
            if not changed:
                return

    # ---- evidence ---------------------------------------------------------------------------------
    def _mutated(self, roots: set[str], node: ast.AST, reason: str, direct: ast.expr | None = None) -> None:
        """Record a possible change of `roots`; certain when `direct` (the changed object) is a
        parameter itself or an attribute/item path into it."""
        certain = _path_root(direct) if direct is not None else None
        for root in sorted(roots):
            evidence = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]
            if root.startswith("global:"):
                self.effects.globals_written.setdefault(root[7:], evidence)
            else:
                self.effects.mutates.setdefault(root, evidence)
                if certain == root:
                    self.effects.definite.setdefault(root, evidence)

    def _world(self, node: ast.AST, reason: str) -> None:
        if self.effects.world is None:
            self.effects.world = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]

    def _file(self, node: ast.AST, reason: str, *, write: bool, path: ast.expr | str | None = None) -> None:
        """Record a file access; `path`: the expression naming the file (or an already made term)."""
        evidence = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]
        if write and self.effects.file_write is None:
            self.effects.file_write = evidence
        elif not write and self.effects.file_read is None:
            self.effects.file_read = evidence
        term = path if isinstance(path, str) else self._path_term(path)
        if term is None:
            self.effects.file_paths_known = False
        else:
            self.effects.file_paths["write" if write else "read"].add(term)

    def _path_term(self, expr: ast.expr | None) -> str | None:
        """`param:NAME` for a parameter the body never rebinds, `const:PATH` for a literal path."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return f"const:{expr.value}"
        if isinstance(expr, ast.Name):
            if expr.id in self.params and expr.id not in self.rebound:
                return f"param:{expr.id}"
            symbol = self.info.symbols.get(expr.id) if expr.id not in self.local_names else None
            if isinstance(symbol, Constant) and isinstance(symbol.value, str):
                return f"const:{symbol.value}"
        return None

    def _file_access(self, call: ast.Call, func: ast.expr, name: str | None) -> None:
        """Whether the call reads or writes files, and which (conservatively: an `open` whose mode is not
        a literal writes; a path dagc cannot name orders the task after every file access)."""
        if isinstance(func, ast.Name) and func.id == "open" and not self._shadowed("open"):
            mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"),
                                                               None)
            reads = mode is None or (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                                     and not set(mode.value) & set("wax+"))
            target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "file"), None)
            self._file(call, f"opens a file (`{ast.unparse(call)}`)", write=not reads, path=target)
        elif name is not None and (name in lib.FILE_WRITES or name.startswith(lib.FILE_PREFIXES_WRITE)):
            self._library_file(call, name, write=True)
        elif name is not None and (name in lib.FILE_READS or name.startswith(lib.FILE_PREFIXES_READ)):
            self._library_file(call, name, write=False)
        elif isinstance(func, ast.Attribute):  # `path.write_text(...)`, `plt.savefig(...)`, `f.write(...)`
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id in self.file_objects:
                return  # a file this body opened: its `open` said which file and how
            if func.attr in lib.FILE_WRITE_METHODS:
                self._file(call, f"calls `.{func.attr}()`", write=True, path=self._method_path(call, func))
            elif func.attr in lib.FILE_READ_METHODS or func.attr == "open":
                self._file(call, f"calls `.{func.attr}()`", write=func.attr == "open",
                           path=self._method_path(call, func))

    def _library_file(self, call: ast.Call, name: str, *, write: bool) -> None:
        index = lib.FILE_PATH_ARGUMENT.get(name)
        arg = call.args[index] if index is not None and index < len(call.args) else None
        if isinstance(arg, ast.Name) and arg.id in self.file_objects:
            return  # `json.dump(x, f)` into a file this body opened
        self._file(call, f"calls `{name}`", write=write, path=arg)

    def _method_path(self, call: ast.Call, func: ast.Attribute) -> ast.expr | None:
        """`Path(p).write_text(...)` / `p.write_text(...)`: the receiver names the file; `df.to_csv(p)`,
        `plt.savefig(p)`, `model.save_pretrained(p)`: the first argument does."""
        if func.attr in lib.PATH_METHODS:
            receiver = func.value
            if isinstance(receiver, ast.Call) and receiver.args and self.qualified(receiver.func) in (
                    "pathlib.Path", "pathlib.PurePath"):
                return receiver.args[0]
            return receiver
        return call.args[0] if call.args else None

    def _rng(self, node: ast.AST, reason: str) -> None:
        if self.effects.rng is None:
            self.effects.rng = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]

    def qualified(self, func: ast.expr) -> str | None:
        """`np.random.rand` → `numpy.random.rand`, following the body's own imports, then the module's;
        None if not a dotted name or if it starts at a local."""
        base = func
        while isinstance(base, ast.Attribute):
            base = base.value
        if not isinstance(base, ast.Name):
            return None
        if base.id in self.local_imports:
            head = self.local_imports[base.id]
            parts = ast.unparse(func).split(".")[1:] if isinstance(func, ast.Attribute) else []
            return ".".join([head if head != "np" else "numpy", *parts])
        if base.id in self.local_names and base.id not in self.global_decl:
            return None
        return module_qualified(func, self.info)

    def run(self) -> Effects:
        self._propagate()
        for node in self.body_nodes:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._assignment(node)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and self._is_global(node.id):
                self.effects.globals_read.add(f"{self.info.name}.{node.id}")
            elif isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
                self._world(node, "a generator or coroutine body")
            elif isinstance(node, (ast.For, ast.comprehension)) and self._draws_when_iterated(node.iter):
                # torch's DataLoader draws its workers' base seed from the global generator on every pass
                self._rng(node, f"iterating `{ast.unparse(node.iter)}` (a DataLoader) draws a seed from the "
                          "global torch generator")
        return self.effects

    def _assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    if isinstance(sub.value, ast.Name) and sub.value.id in self.new_containers:
                        continue  # a container built here: its items change, no argument does
                    roots = self.roots(sub.value)
                    what = "assigns into" if not isinstance(node, ast.Delete) else "deletes from"
                    self._mutated(roots, sub, f"{what} `{ast.unparse(sub)}`", direct=sub.value)
            if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
                if self.alias.get(target.id) and target.id not in self.new_containers:
                    # `p -= lr * p.grad` on a loop alias of a model's parameters, `t = x[0]; t -= 1`: a tensor,
                    # list or dict is updated in place (only immutables rebind)
                    self._mutated(set(self.alias[target.id]), target,
                                  f"updates `{target.id}` in place (`{ast.unparse(node).strip()}`)")
                elif target.id in self.global_decl:
                    self._mutated({f"global:{self.info.name}.{target.id}"}, target,
                                  f"rebinds the global `{target.id}`")
            elif isinstance(target, ast.Name) and target.id in self.global_decl and not isinstance(node, ast.Delete):
                self._mutated({f"global:{self.info.name}.{target.id}"}, target, f"rebinds the global `{target.id}`")

    def _call(self, call: ast.Call) -> None:
        func = call.func
        name = self.qualified(func)
        args = [*call.args, *(k.value for k in call.keywords)]
        self._file_access(call, func, name)
        # the global RNG
        if name is not None and self._uses_rng(name, call):
            self._rng(call, f"`{ast.unparse(func)}` uses the global random number generator")
            if name in lib.SEEDING:
                self.effects.seeds = True
        if isinstance(func, ast.Name):
            if func.id in self.alias:  # calling a parameter (a module's forward, a callback)
                self._mutated(self.roots(func), call, f"calls `{func.id}`, which may change its state")
                cls = self._user_class(self.annotations.get(func.id))
                if cls is not None and not self._evaluation_only(func.id) and self.analyzer.forward_draws(*cls):
                    self._rng(call, f"calls `{func.id}`, a `{cls[0].name}` whose layers draw random numbers "
                              "(dropout) when called in training mode")
            else:
                value = self._global_value(func.id)
                if value is not None:
                    return self._call_global(call, func.id, value, args)
        if isinstance(func, ast.Attribute) and name is None:
            return self._method_call(call, func, args)
        if isinstance(func, ast.Name) and not self._shadowed(func.id):  # a builtin
            if func.id == "print":
                target = next((k.value for k in call.keywords if k.arg == "file"), None)
                if target is None or ast.unparse(target) in ("sys.stdout", "sys.stderr"):
                    self._output(call, "prints")
                else:
                    self._file(call, f"prints to `{ast.unparse(target)}`", write=True)
                return
            if func.id in lib.WORLD_BUILTINS:
                self._world(call, f"calls `{func.id}()`")
                if func.id in ("setattr", "delattr") and call.args:
                    self._mutated(self.roots(call.args[0]), call, f"calls `{func.id}()` on it")
                return
            if func.id in ("next",):
                for arg in call.args[:1]:
                    self._mutated(self.roots(arg), call, "advances it with `next()`")
                return
            if func.id in lib.PURE_BUILTINS or func.id.endswith(("Error", "Exception", "Warning")):
                return  # (raising is not an effect: a removed call that would fail is not kept for it)
        # a helper of the user's own
        helper = self._helper(func)
        if helper is not None:
            fn, info = helper
            if id(fn) not in self.analyzer.code_of:
                owner = fn.name if fn.name != "__init__" else ast.unparse(func).rpartition(".")[2]
                task = next((t for t in info.tasks.values() if t.node is fn), None)
                self.analyzer.code_of[id(fn)] = f"{info.name}:{task.qualname if task is not None else owner}"
            inner = self.analyzer.of_function(fn, info)
            self._apply_helper(call, fn, inner)
            return
        if isinstance(func, ast.Name) and func.id in self.local_names and func.id not in self.local_imports:
            cls = self._user_class(self.annotations.get(func.id)) if func.id in self.alias else None
            forward = next((m for m in cls[0].body if isinstance(m, ast.FunctionDef)
                            and m.name in ("forward", "__call__")), None) if cls is not None else None
            if forward is not None and cls is not None:  # `model(x)` with `model: Net`: Net.forward, read
                self.analyzer.code_of.setdefault(id(forward), f"{cls[1].name}:{cls[0].name}")
                self._apply_helper(call, forward, self.analyzer.of_function(forward, cls[1]), receiver=func)
                return None
            # a local callable (a lambda, a nested def, a model built here): effects stay local
            return self._arguments(call, args, pure=func.id not in self.alias)
        if name is not None:
            return self._library_call(call, name, args)
        self._world(call, f"calls `{ast.unparse(func)}`, which dagc does not know")
        self._arguments(call, args, pure=False)

    def _call_global(self, call: ast.Call, name: str, value: GlobalValue, args: list[ast.expr]) -> None:
        """Calling a module-level object: a loss or activation layer holding nothing changes nothing; a
        logger or progress bar outputs; anything else may change itself and its arguments."""
        if value.kind == "output":
            return self._output(call, f"calls `{name}`")
        if value.kind == "layer" and value.layer is not None and value.layer.stateless:
            if value.layer.forward_rng:
                self._rng(call, f"calls `{name}` ({value.constructor}), which draws random numbers")
            return
        if value.kind == "immutable":
            return
        self._mutated({f"global:{self.info.name}.{name}"}, call, f"calls `{name}`, which may change its state")
        if value.kind != "layer":
            self._world(call, f"calls `{name}`, which dagc does not know")
            self._arguments(call, args, pure=False)

    def _method_call(self, call: ast.Call, func: ast.Attribute, args: list[ast.expr]) -> None:
        receiver = func.value
        kwargs = {k.arg for k in call.keywords}
        if isinstance(receiver, ast.Name) and (value := self._global_value(receiver.id)) is not None \
                and value.kind == "output":
            return self._output(call, f"calls `{ast.unparse(func)}`")  # a module-level logger, bar or writer
        roots = self.roots(receiver)
        if isinstance(receiver, ast.Name) and receiver.id in self.new_containers and func.attr in lib.CONTAINER_METHODS:
            roots = set()  # `new = list(xs); new.append(v)`: the new list changes, not `xs`
        if func.attr in lib.CONVERSIONS:  # `.to()`, `.half()`: a copy of a tensor, in place on a module
            roots = {r for r in roots if not _is_data_annotation(self.annotations.get(r))}
            if self._moves_device(call, func.attr):
                roots = set()  # a move between devices keeps every value: it changes no result
        if roots and not (func.attr in lib.READ_METHODS and not (kwargs & lib.MUTATING_KWARGS)):
            known = func.attr in lib.KNOWN_MUTATORS or (func.attr.endswith("_") and not func.attr.endswith("__"))
            self._mutated(roots, call, f"calls `.{func.attr}()` on `{ast.unparse(receiver)}`",
                          direct=receiver if known else None)
        if lib.catalogue().method_draws(func.attr) and "generator" not in kwargs:
            self._rng(call, f"`.{func.attr}()` uses the global random number generator")
        if func.attr in ("debug", "info", "warning", "error", "exception", "critical"):
            self._output(call, f"calls `.{func.attr}()`")
        elif func.attr in ("send", "sendall", "put", "emit", "post", "upload", "upload_file"):
            self._world(call, f"calls `.{func.attr}()`")
        # a method of one of the user's own classes (any class defining it: the receiver's class is not known)
        for fn, module, static in self.analyzer.methods_named(func.attr):
            inner = self.analyzer.of_function(fn, module)
            self._apply_helper(call, fn, inner, receiver=None if static else receiver)
        self._arguments(call, args, pure=True)

    def _moves_device(self, call: ast.Call, method: str) -> bool:
        """`.cuda()`, `.cpu()`, `.to(device)`: a move that keeps every value (not `.to(torch.float16)`)."""
        if method in ("cuda", "cpu"):
            return not any(k.arg in ("dtype", "memory_format") for k in call.keywords)
        if method != "to" or len(call.args) > 1 or any(k.arg not in ("device", "non_blocking") for k in call.keywords):
            return False
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
        return target is not None and self._is_device(target)

    def _is_device(self, expr: ast.expr) -> bool:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value.split(":")[0] in ("cpu", "cuda", "mps", "xpu", "meta")
        if isinstance(expr, ast.Attribute) and expr.attr == "device":
            return True
        if isinstance(expr, ast.Call):
            return self.qualified(expr.func) == "torch.device"
        if isinstance(expr, ast.IfExp):
            return self._is_device(expr.body) and self._is_device(expr.orelse)
        if isinstance(expr, ast.Name):
            value = self._global_value(expr.id)
            if value is not None:
                return value.device
            annotation = self.annotations.get(expr.id) or ""
            return "device" in annotation or expr.id in ("device", "dev") or expr.id.endswith("_device")
        return False

    def _library_call(self, call: ast.Call, name: str, args: list[ast.expr]) -> None:
        kwargs = {k.arg for k in call.keywords}
        if lib.is_no_effect_function(name):
            return
        if lib.is_output_function(name):
            return self._output(call, f"calls `{name}`")
        if name.startswith("torch."):
            facts = lib.catalogue().function(name)
            if facts is not None:  # what torch's schemas say the function writes
                for index in facts.mutates:
                    if index < len(call.args):
                        arg = call.args[index]
                        self._mutated(self.roots(arg), arg, f"passes `{ast.unparse(arg)}` to `{name}`, which "
                                      "changes it in place", direct=arg)
                for k in call.keywords:
                    if k.arg == "out" and facts.out:
                        self._mutated(self.roots(k.value), k.value, f"`{name}` writes `out=`", direct=k.value)
                return
        pure_lib = (any(name == m or name.startswith(m + ".") for m in lib.PURE_MODULES)
                    and not any(name == f or name.startswith(f + ".") for f in lib.IMPURE_FUNCTIONS)
                    and not (name.rsplit(".", 1)[-1].endswith("_") and not name.endswith("__"))
                    and not (kwargs & lib.MUTATING_KWARGS))
        if any(name.startswith(p) for p in lib.WORLD_PREFIXES) or name in lib.IMPURE_FUNCTIONS or any(
                name.startswith(f + ".") for f in lib.IMPURE_FUNCTIONS):
            self._world(call, f"calls `{name}`")
        if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper():
            return  # a layer or loss constructor keeps references but changes nothing
        if name.startswith("torch.optim.") or name.startswith("torch.utils.data.") or lib.is_output_constructor(name):
            return
        if pure_lib or self._rng_only(name):
            return
        self._world(call, f"calls `{name}`, which dagc does not know")
        return self._arguments(call, args, pure=False)

    def _fresh_library_result(self, name: str) -> bool:
        """A library function whose result is a new object (torch.cat, F.cross_entropy, np.mean), not
        a view of, or a container holding, its arguments."""
        if any(name == f or name.startswith(f + ".") for f in lib.ALIASING_FUNCTIONS):
            return False
        last = name.rsplit(".", 1)[-1]
        if last[:1].isupper():  # a class: the object may keep references to its arguments
            return False
        return name.startswith(("torch.", "numpy.", "math.", "statistics.", "json.", "pickle.", "hashlib.",
                                "base64.", "copy.deepcopy"))

    def _rng_only(self, name: str) -> bool:
        return name.startswith(lib.RNG_PREFIXES) or name in lib.RNG_FUNCTIONS

    def _output(self, node: ast.AST, reason: str) -> None:
        if self.effects.output is None:
            self.effects.output = Evidence(node.lineno, node.col_offset, reason)  # type: ignore[attr-defined]

    def _arguments(self, call: ast.Call, args: list[ast.expr], *, pure: bool) -> None:
        if pure:
            return
        for arg in args:
            roots = self.roots(arg)
            if roots:
                what = ast.unparse(call.func)
                self._mutated(roots, arg, f"passes `{ast.unparse(arg)}` to `{what}`, which dagc does not know")

    def _uses_rng(self, name: str, call: ast.Call) -> bool:
        if name in lib.RNG_EXEMPT:
            return False
        if any(k.arg == "generator" for k in call.keywords):
            return False
        if name in lib.RNG_FUNCTIONS or name.startswith(lib.RNG_PREFIXES):
            return True
        if not name.startswith("torch."):
            return False
        catalogue = lib.catalogue()
        facts = catalogue.function(name)
        if facts is not None:
            return facts.rng
        # a layer whose constructor draws its initial weights, or whose forward draws (dropout), when it
        # is built in the task that calls it
        layer = catalogue.layer(name)
        return layer is not None and (layer.init_rng or layer.forward_rng)

    def _helper(self, func: ast.expr) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo] | None:
        """A plain function or task of the user's own modules that `func` names, with its module."""
        project = self.analyzer.project
        if isinstance(func, ast.Name) and func.id not in self.local_names:
            symbol = project.lookup(self.info, func.id)
            return _function_of(symbol, project, self.info)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            symbol = self.info.symbols.get(func.value.id)
            if isinstance(symbol, ImportedModule) and project.is_user_module(symbol.module):
                module = project.module(symbol.module)
                if module is not None:
                    return _function_of(project.lookup(module, func.attr), project, module)
        return None

    def _apply_helper(self, call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef, inner: Effects,
                      receiver: ast.expr | None = None) -> None:
        where = f"`{ast.unparse(call.func)}`"
        if inner.world is not None:
            self._world(call, f"calls {where}, which {inner.world.reason}")
        if inner.output is not None:
            self._output(call, f"calls {where}, which {inner.output.reason}")
        code = self.analyzer.code_of.get(id(fn))
        if code is not None:
            self.effects.reaches.add(code)
        self.effects.reaches |= inner.reaches
        if inner.rng is not None:
            self._rng(call, f"calls {where}, which uses the global random number generator")
        params_in_order = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        if fn.name == "__init__" or receiver is not None:
            params_in_order = params_in_order[1:]
        given = dict(zip(params_in_order, call.args))
        given.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
        for evidence, write in ((inner.file_read, False), (inner.file_write, True)):
            if evidence is None:
                continue
            reason = f"calls {where}, which {evidence.reason}"
            terms = inner.file_paths["write" if write else "read"]
            if not inner.file_paths_known:
                self._file(call, reason, write=write)  # a path the helper does not name: unknown here too
            for term in sorted(terms):
                if term.startswith("param:"):  # the helper's parameter: what this call passes
                    self._file(call, reason, write=write, path=given.get(term[len("param:"):]))
                else:
                    self._file(call, reason, write=write, path=term)
        self.effects.seeds = self.effects.seeds or inner.seeds
        for name, evidence in inner.globals_written.items():
            self.effects.globals_written.setdefault(name, Evidence(call.lineno, call.col_offset,
                                                                   f"calls {where}, which {evidence.reason}"))
        self.effects.globals_read |= inner.globals_read
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        bound: dict[str, ast.expr] = {}
        if fn.name == "__init__":
            params = params[1:]  # a class of the user's: `self` is the new object
        elif receiver is not None and params:
            bound[params[0]] = receiver  # a method: `self` is the object it is called on
            params = params[1:]
        bound.update(zip(params, call.args))
        bound.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
        star = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
        for param, arg in bound.items():
            if param in inner.mutates or star or (fn.args.vararg and len(call.args) > len(params)):
                if param in inner.mutates or star:
                    self._mutated(self.roots(arg), arg, f"passes `{ast.unparse(arg)}` to {where}, which "
                                  f"{inner.mutates[param].reason if param in inner.mutates else 'takes *args'}")


def _builds_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name) and func.id in ("dict", "list", "set", "sorted", "OrderedDict", "defaultdict"):
            return True
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not value.args:
            return True
        if isinstance(func, ast.Attribute) and func.attr in ("copy", "deepcopy") and isinstance(func.value, ast.Name) \
                and func.value.id == "copy":
            return True
    return False


def _function_of(symbol: object, project: Project, info: ModuleInfo,
                 ) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ModuleInfo] | None:
    if isinstance(symbol, TaskDef):
        module = project.module(symbol.module)
        return (symbol.node, module) if module is not None else None
    if isinstance(symbol, Opaque) and symbol.kind == "function" and isinstance(
            symbol.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        # the symbol's module: the one whose tree holds the node
        for module in _loaded_modules(project):
            if module.symbols.get(symbol.node.name) is symbol:
                return symbol.node, module
        return symbol.node, info
    if isinstance(symbol, Opaque) and symbol.kind == "class" and isinstance(symbol.node, ast.ClassDef):
        # constructing one of the user's classes runs its __init__ (no __init__: effects of object())
        init = next((s for s in symbol.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and s.name == "__init__"), None)
        if init is None:
            init = ast.FunctionDef("__init__", ast.arguments([], [ast.arg("self")], None, [], [], None, []),
                                   [ast.Pass()], [], None, lineno=symbol.node.lineno,
                                   col_offset=symbol.node.col_offset)
        owner = next((m for m in _loaded_modules(project) if m.symbols.get(symbol.node.name) is symbol), info)
        return init, owner
    return None


def _loaded_modules(project: Project) -> list[ModuleInfo]:
    modules = getattr(project, "_modules", None) or getattr(project, "modules", None) or {}
    return [m for m in (modules.values() if isinstance(modules, dict) else modules) if m is not None]
