"""One pass over a function body: which locals may alias which parameters, then the evidence of each
effect."""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING

from dagc.frontend import library as lib
from dagc.frontend.effects.calls import fresh_library_result, scan_call
from dagc.frontend.effects.locals import LocalValues
from dagc.frontend.effects.summary import Effects, Evidence
from dagc.frontend.modules import Constant, ImportedModule, ImportedName, ModuleInfo, Opaque
from dagc.frontend.values import (
    IMMUTABLE,
    GlobalValue,
    is_immutable_constant,
    module_qualified,
)
from dagc.ir.effects import is_immutable_type

if TYPE_CHECKING:
    from dagc.frontend.effects.analyzer import EffectAnalyzer


def _path_root(expr: ast.expr | None) -> str | None:
    """`p` for `p`, `p.a`, `p[k].b`: the name an attribute/item path starts from, else None."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def value_imports(analyzer: EffectAnalyzer, info: ModuleInfo, name: str) -> list[tuple[str, str]]:
    """The names imported from other modules that module-level value `name` is built from, through the module's
    other values (`LR = BASE * 2`, `BASE = settings.BASE_LR`): (module, name), for the fingerprint to cover them."""
    cache = analyzer.__dict__.setdefault("_value_imports", {})
    key = (info.name, name)
    if key in cache:
        return cache[key]
    cache[key] = []  # (a cycle: nothing more)
    found: dict[tuple[str, str], None] = {}
    for stmt in info.source.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if name not in names:
            continue
        for read in sorted(names - {name}):
            symbol = info.symbols.get(read)
            if isinstance(symbol, ImportedName):
                found[(symbol.module, symbol.name)] = None
            elif isinstance(symbol, ImportedModule):
                for node in ast.walk(stmt):  # `settings.BASE_LR`
                    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == read:
                        found[(symbol.module, node.attr)] = None
            elif isinstance(symbol, Constant) or isinstance(symbol, Opaque) and symbol.kind == "value":
                found.update(dict.fromkeys(value_imports(analyzer, info, read)))
    cache[key] = list(found)
    return cache[key]


class FunctionScan(LocalValues):
    """One pass over a function body: which locals may alias which parameters, then the evidence."""

    def __init__(self, analyzer: EffectAnalyzer, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                 info: ModuleInfo, types: dict[str, str] | None = None) -> None:
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
        # (a parameter without an annotation takes the type of what the call passes, where it is known)
        annotations = {a.arg: ast.unparse(a.annotation) if a.annotation is not None else (types or {}).get(a.arg)
                       for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        self.annotations = annotations
        # name -> parameters it may alias (scalars cannot be changed in place, so they alias nothing)
        # (nor do instances of the user's frozen dataclasses and NamedTuples)
        self.alias: dict[str, set[str]] = {p: {p} for p in self.params if not is_immutable_type(annotations.get(p))
                                           and not self._frozen_annotation(annotations.get(p))}
        # the body only: decorators, annotations and defaults run once, when the function is defined
        self.body_nodes = [n for stmt in fn.body for n in ast.walk(stmt)]
        self.local_names = self._locals()
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
            if isinstance(opened, ast.Call) and (isinstance(opened.func, ast.Name) and opened.func.id == "open"
                                                 or isinstance(opened.func, ast.Attribute) and opened.func.attr == "open"
                                                 and isinstance(opened.func.value, ast.Call)) \
                    and isinstance(target, ast.Name):  # `open(p)`, or `Path(p).open(...)` (that call names the file)
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
        # names holding pandas objects (annotated so, or built by pandas): what their methods return and their
        # items behave as copies (Copy-on-Write), sharing nothing with them
        self.frames = self._frames()
        # parameters the body first rebinds to a copy (`df = df.copy()`, `cfg = copy.deepcopy(cfg)`): a new object
        self.copied = self._copied_params()
        for param, kind in self.copied.items():
            if kind == "deep" and param in self.alias:
                self.alias[param] = set()  # nothing of the caller's object is reachable from the copy
        self.new_containers = self._new_containers()

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
            if isinstance(expr.value, ast.Name) and (value := self.global_value(expr.value.id)) is not None \
                    and value.kind == "namespace":
                return set()  # `args.lr`: a value parsed from the command line, not the namespace
            if isinstance(expr.value, ast.Name) and expr.value.id in self.params \
                    and (self.annotations.get(expr.value.id) or "").rpartition(".")[2] == "Namespace":
                return set()  # the same, of an `args` parameter given the parsed namespace
            return set() if expr.attr in lib.SCALAR_ATTRS else self.roots(expr.value)
        if isinstance(expr, ast.Subscript):
            if self._immutable_items(expr.value):
                return set()  # `CFG["dim"]`: an int read from a module-level config is not the config
            return self.roots(expr.value)  # an item is part of its container; the key is not
        no_copy = isinstance(expr, ast.Call) and any(
            k.arg == "copy" and isinstance(k.value, ast.Constant) and k.value.value is False for k in expr.keywords)
        if not no_copy and isinstance(expr, (ast.Call, ast.Subscript)) and self.frames and self._frame_expr(
                expr, self.frames, lib.catalogue().copy_on_write):
            return set()  # pandas' Copy-on-Write: a derived frame or series shares nothing with its source
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in lib.FRESH_METHODS:
                return set()
            if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda", "cpu") and not any(
                    k.arg in ("dtype", "memory_format", "copy") for k in expr.keywords):
                return self.roots(func.value)  # `Net().to(device)`: the object moved (or a copy), never the device
            if isinstance(func, ast.Attribute) and func.attr in ("get", "values", "items", "keys", "copy") \
                    and self._immutable_items(func.value):
                return set()
            if isinstance(func, ast.Name) and (value := self.global_value(func.id)) is not None \
                    and value.kind == "layer" and value.layer is not None and value.layer.stateless:
                return set()  # `criterion(out, y)`: a loss or activation computes a new tensor
            if isinstance(func, ast.Name) and func.id in self.stateless_locals:
                return set()  # `loss_fn = nn.CrossEntropyLoss()` built here: its result is a new tensor
            if isinstance(func, ast.Name) and func.id in lib.FRESH_BUILTINS and not self.shadowed(func.id):
                return set()
            name = self.qualified(func)
            if name is not None and not no_copy and fresh_library_result(self, name):
                return set()
            known = lib.catalogue().library_function(name) if name is not None else None
            if known is not None and known.estimator:
                return set()  # scikit-learn's API: an estimator keeps its hyperparameters and never changes them
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

    def global_value(self, name: str) -> GlobalValue | None:
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
        value = self.global_value(name)
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

    def shadowed(self, name: str) -> bool:
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
    def mutated(self, roots: set[str], node: ast.AST, reason: str, direct: ast.expr | None = None) -> None:
        """Record a possible change of `roots`; certain when `direct` (the changed object) is a
        parameter itself or an attribute/item path into it."""
        certain = _path_root(direct) if direct is not None else None
        for root in sorted(roots):
            evidence = Evidence.at(node, reason)
            if root.startswith("global:"):
                self.effects.globals_written.setdefault(root[7:], evidence)
            else:
                self.effects.mutates.setdefault(root, evidence)
                if certain == root:
                    self.effects.definite.setdefault(root, evidence)

    def world(self, node: ast.AST, reason: str) -> None:
        if self.effects.world is None:
            self.effects.world = Evidence.at(node, reason)

    def file(self, node: ast.AST, reason: str, *, write: bool, path: ast.expr | str | None = None) -> None:
        """Record a file access; `path`: the expression naming the file (or an already made term)."""
        evidence = Evidence.at(node, reason)
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

    @staticmethod
    def reads_only(call: ast.Call) -> bool:
        """An `open(...)` whose mode is absent or a literal without w, a, x or +."""
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        return mode is None or (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                                and not set(mode.value) & set("wax+"))

    def file_access(self, call: ast.Call, func: ast.expr, name: str | None) -> None:
        """Whether the call reads or writes files, and which (conservatively: an `open` whose mode is not
        a literal writes; a path dagc cannot name orders the task after every file access)."""
        if isinstance(func, ast.Name) and func.id == "open" and not self.shadowed("open"):
            reads = self.reads_only(call)
            target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "file"), None)
            self.file(call, f"opens a file (`{ast.unparse(call)}`)", write=not reads, path=target)
        elif name is not None and (name in lib.FILE_WRITES or name.startswith(lib.FILE_PREFIXES_WRITE)):
            self._library_file(call, name, write=True)
        elif name is not None and (name in lib.FILE_READS or name.startswith(lib.FILE_PREFIXES_READ)):
            self._library_file(call, name, write=False)
        elif isinstance(func, ast.Attribute):  # `path.write_text(...)`, `plt.savefig(...)`, `f.write(...)`
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id in self.file_objects:
                return  # a file this body opened: its `open` said which file and how
            if func.attr in lib.FILE_WRITE_METHODS:
                self.file(call, f"calls `.{func.attr}()`", write=True, path=self._method_path(call, func))
            elif func.attr in lib.FILE_READ_METHODS or func.attr == "open":
                self.file(call, f"calls `.{func.attr}()`", write=func.attr == "open" and not _opens_to_read(call),
                           path=self._method_path(call, func))

    def _library_file(self, call: ast.Call, name: str, *, write: bool) -> None:
        index = lib.FILE_PATH_ARGUMENT.get(name)
        arg = call.args[index] if index is not None and index < len(call.args) else None
        if isinstance(arg, ast.Name) and arg.id in self.file_objects:
            return  # `json.dump(x, f)` into a file this body opened
        if isinstance(arg, ast.Call) and (isinstance(arg.func, ast.Name) and arg.func.id == "open"
                                          and not self.shadowed("open")
                                          or isinstance(arg.func, ast.Attribute) and arg.func.attr == "open"):
            return  # `json.load(open(p))`, `torch.load(Path(p).open("rb"))`: that `open` says which file and how
        self.file(call, f"calls `{name}`", write=write, path=arg)

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

    def varies(self, node: ast.AST, reason: str) -> None:
        if self.effects.varies is None:
            self.effects.varies = Evidence.at(node, reason)

    def rng(self, node: ast.AST, reason: str, advances: bool = False) -> None:
        """A draw from a global generator; `advances`: what the body computes does not depend on it."""
        if self.effects.rng is None or self.effects.rng_depends is False and not advances:
            self.effects.rng = Evidence.at(node, reason)
        self.effects.rng_depends = self.effects.rng_depends or not advances

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
                scan_call(self, node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in self.local_names:
                if self._is_global(node.id):
                    self.effects.globals_read.add(f"{self.info.name}.{node.id}")
                self._value_read(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id not in self.local_names:
                self._module_attribute_read(node.value.id, node.attr)
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                # (a coroutine's `await` is no effect of its own: what it awaits is a call, read as any call; a
                # coroutine is run to completion where dagc runs one, as a Prefect async task)
                self.world(node, "a generator body")
            elif isinstance(node, (ast.For, ast.comprehension)) and self._draws_when_iterated(node.iter):
                # torch's DataLoader draws its workers' base seed from the global generator on every pass
                # (a comprehension has no position of its own: its iterable's is where the draw happens)
                self.rng(node.iter, f"iterating `{ast.unparse(node.iter)}` (a DataLoader) draws a seed from the "
                          "global torch generator")
        self.effects.fresh_result = self._returns_fresh()
        if not self.effects.fresh_result:
            self.effects.fresh_items = self._fresh_items()
        return self.effects

    def _returns(self) -> list[ast.Return] | None:
        """The body's own `return` statements (not those of a nested function); None for a generator."""
        found: list[ast.Return] = []
        todo: list[ast.AST] = list(self.fn.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return None
            if isinstance(node, ast.Return):
                found.append(node)
            todo.extend(ast.iter_child_nodes(node))
        return found

    def _returns_fresh(self) -> bool:
        """Every `return` of the body (not of a nested function) gives an object that shares nothing with the
        arguments or module-level objects, and the body is no generator."""
        found = self._returns()
        if found is None:
            return False
        holders = self._holders()
        return all(r.value is None or not self.roots(r.value) and not (
            {n.id for n in ast.walk(r.value) if isinstance(n, ast.Name)} & holders) for r in found)

    def _fresh_items(self) -> tuple[bool, ...] | None:
        """Per item of the tuple every `return` gives (all of one length, the body no generator), whether it
        shares nothing with the arguments or module-level objects; None for any other body."""
        found = self._returns()
        if not found or not all(isinstance(r.value, ast.Tuple) and not any(isinstance(e, ast.Starred)
                                                                         for e in r.value.elts) for r in found):
            return None
        lengths = {len(r.value.elts) for r in found}  # type: ignore[union-attr]
        if len(lengths) != 1:
            return None
        holders = self._holders()
        items = [True] * lengths.pop()
        reach: list[set[str]] = [set() for _ in items]  # the body's locals each item may hold
        for r in found:
            for k, elt in enumerate(r.value.elts):  # type: ignore[union-attr]
                if self.roots(elt) or {n.id for n in ast.walk(elt) if isinstance(n, ast.Name)} & holders:
                    items[k] = False
                reach[k] |= self._locals_reached(elt)
        # a new item that shares a local with one that holds an argument's objects is not new (`return model,
        # Wrapper(model, dataset)`); new items that share locals among themselves stay together (ir/effects.py)
        for k in range(len(items)):
            if items[k] and any(not items[j] and reach[k] & reach[j] for j in range(len(items))):
                items[k] = False
        return tuple(items) if any(items) else None

    @functools.cached_property
    def _assigned_values(self) -> dict[str, list[ast.expr]]:
        """Per name the body assigns, the expressions assigned to it."""
        assigned: dict[str, list[ast.expr]] = {}
        for node in self.body_nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                        assigned.setdefault(name, []).append(node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None \
                    and isinstance(node.target, ast.Name):
                assigned.setdefault(node.target.id, []).append(node.value)
        return assigned

    def _locals_reached(self, expr: ast.expr) -> set[str]:
        """The body's own names `expr` reads, and those their assignments read, transitively (not parameters)."""
        assigned = self._assigned_values
        found: set[str] = set()
        todo = [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)]
        while todo:
            name = todo.pop()
            if name in found or name in self.params or name not in self.local_names:
                continue
            found.add(name)
            for value in assigned.get(name, ()):
                todo.extend(n.id for n in ast.walk(value) if isinstance(n, ast.Name))
        return found

    def _holders(self) -> set[str]:
        """Locals something that may share objects with the arguments was stored into (`out["m"] = model`,
        `out.append(model)`): what they hold is not the task's own, though the container is."""
        found: set[str] = set()
        for node in self.body_nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, (ast.Subscript, ast.Attribute)) and self.roots(node.value):
                        holder = _path_root(target)
                        if holder is not None:
                            found.add(holder)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in lib.STORING_METHODS:
                holder = _path_root(node.func.value)
                if holder is not None and any(self.roots(a) for a in (*node.args, *(k.value for k in node.keywords))):
                    found.add(holder)
        return found

    def _value_read(self, name: str) -> None:
        """A module-level value the body reads (a constant, a config dict, a table; here or imported from
        another of the user's modules): its definition enters the task's fingerprint (dagc.runtime.code),
        so that editing `LR = 0.1` recomputes its readers under --cache and --resume."""
        symbol = self.info.symbols.get(name)
        if isinstance(symbol, Constant) or isinstance(symbol, Opaque) and symbol.kind == "value" \
                or name in self.global_decl:
            self.effects.reaches.add(f"{self.info.name}:{name}")
            for module, imported in value_imports(self.analyzer, self.info, name):
                self._imported_value(module, imported)  # `LR = BASE_LR * 2`, `BASE_LR` from settings
        elif isinstance(symbol, ImportedName):
            self._imported_value(symbol.module, symbol.name)

    def _module_attribute_read(self, name: str, attr: str) -> None:
        """`config.LR` where `config` is one of the user's modules."""
        symbol = self.info.symbols.get(name)
        if isinstance(symbol, ImportedModule):
            self._imported_value(symbol.module, attr)

    def _imported_value(self, module: str, name: str, depth: int = 0) -> None:
        """A value of another of the user's modules (through its re-exports)."""
        owner = self.analyzer.project.module(module)
        if owner is None or depth > 20:
            return
        symbol = owner.symbols.get(name)
        if isinstance(symbol, Constant) or isinstance(symbol, Opaque) and symbol.kind == "value":
            self.effects.reaches.add(f"{owner.name}:{name}")
        elif isinstance(symbol, ImportedName):
            self._imported_value(symbol.module, symbol.name, depth + 1)

    def _assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    if isinstance(sub.value, ast.Name) and sub.value.id in self.new_containers:
                        continue  # a container built here: its items change, no argument does
                    roots = self.roots(sub.value)
                    what = "assigns into" if not isinstance(node, ast.Delete) else "deletes from"
                    self.mutated(roots, sub, f"{what} `{ast.unparse(sub)}`", direct=sub.value)
            if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
                if self.alias.get(target.id) and target.id not in self.new_containers:
                    # `p -= lr * p.grad` on a loop alias of a model's parameters, `t = x[0]; t -= 1`: a tensor,
                    # list or dict is updated in place (only immutables rebind)
                    self.mutated(set(self.alias[target.id]), target,
                                  f"updates `{target.id}` in place (`{ast.unparse(node).strip()}`)")
                elif target.id in self.global_decl:
                    self.mutated({f"global:{self.info.name}.{target.id}"}, target,
                                  f"rebinds the global `{target.id}`")
            elif isinstance(target, ast.Name) and target.id in self.global_decl and not isinstance(node, ast.Delete):
                self.mutated({f"global:{self.info.name}.{target.id}"}, target, f"rebinds the global `{target.id}`")


def _opens_to_read(call: ast.Call) -> bool:
    """`p.open()`, `p.open("rb")`, `p.open(mode="r")`: a method `open` whose mode (its first argument, as
    `Path.open` takes it, or `mode=`) is absent or a literal of r, b and t only. Anything else (`zf.open(name)`,
    whose first argument is a name, or a mode dagc cannot read) counts as a write."""
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None and call.args:
        mode = call.args[0]
    if mode is None:
        return not call.keywords or all(k.arg in ("encoding", "errors", "newline", "buffering") for k in call.keywords)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(mode.value) \
        and set(mode.value) <= set("rbt")
