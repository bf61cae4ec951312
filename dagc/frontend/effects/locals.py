"""What the locals of a function body hold, read before its effects are: layers without state, new containers,
pandas frames (Copy-on-Write), parameters rebound to copies, user classes and frozen annotations."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from dagc.frontend import library as lib
from dagc.frontend.effects.lookup import loaded_modules
from dagc.frontend.modules import ModuleInfo
from dagc.frontend.values import (
    is_frozen_class,
)

if TYPE_CHECKING:
    from dagc.frontend.effects.analyzer import EffectAnalyzer




def _builds_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name) and func.id in lib.CONTAINER_CONSTRUCTORS:
            return True
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not value.args:
            return True
        if isinstance(func, ast.Attribute) and func.attr in ("copy", "deepcopy") and isinstance(func.value, ast.Name) \
                and func.value.id == "copy":
            return True
    return False


class LocalValues:
    """The part of `FunctionScan` that classifies the body's locals (a mixin: it reads the scan's fields)."""

    analyzer: EffectAnalyzer
    fn: ast.FunctionDef | ast.AsyncFunctionDef
    info: ModuleInfo
    params: list[str]
    annotations: dict[str, str | None]
    body_nodes: list[ast.AST]
    local_names: set[str]
    local_imports: dict[str, str]

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
                and iterable.func.id in lib.ITERATION_WRAPPERS:
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
        return name in lib.DATA_LOADERS and not any(
            k.arg == "generator" for k in call.keywords)

    def evaluation_only(self, name: str) -> bool:
        """The body puts `name` in evaluation mode (`model.eval()`) and never in training mode: its
        dropout layers draw nothing."""
        modes = {node.func.attr for node in self.body_nodes if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                 and node.func.value.id == name and node.func.attr in ("eval", "train")}
        return modes == {"eval"}

    def user_class(self, annotation: str | None) -> tuple[ast.ClassDef, ModuleInfo] | None:
        """The user's class an annotation names (`model: Net`), with its module."""
        if not annotation or not annotation.isidentifier():
            return None
        symbol = self.analyzer.project.lookup(self.info, annotation)
        node = getattr(symbol, "node", None)
        if not isinstance(node, ast.ClassDef):
            return None
        owner = next((m for m in loaded_modules(self.analyzer.project) if m.symbols.get(node.name) is symbol),
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
                    fresh[target.id] = fresh.get(target.id, True) and (_builds_container(value) or (
                        target.id in self.copied and self._derived_from_itself(value, target.id)))
                else:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            fresh[sub.id] = False
        return {name for name, is_new in fresh.items() if is_new and (name not in self.params or name in self.copied)}

    def _frames(self) -> set[str]:
        cow = lib.catalogue().copy_on_write
        if not cow:
            return set()
        found = {p for p in self.params if any(word in (self.annotations.get(p) or "") for word in
                                                ("DataFrame", "Series"))}
        values: dict[str, list[ast.expr | None]] = {}
        simple: set[int] = set()
        for node in self.body_nodes:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                values.setdefault(node.targets[0].id, []).append(node.value)
                simple.add(id(node.targets[0]))
        for node in self.body_nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in simple:
                values.setdefault(node.id, []).append(None)  # bound otherwise (a loop, unpacking): not known
        # the greatest fixpoint: assume every local bound only by calls and items is one, drop those with a binding
        # that is not (`t = t.dropna()` after `t = a.merge(b)` stays one)
        candidates = {name for name, exprs in values.items() if name not in self.params
                      and all(isinstance(e, (ast.Call, ast.Subscript)) for e in exprs)}
        while True:
            frames = found | candidates
            dropped = {name for name in candidates
                       if not all(e is not None and self._frame_expr(e, frames, cow) for e in values[name])}
            if not dropped:
                return frames
            candidates -= dropped

    def _frame_expr(self, expr: ast.expr, frames: set[str], cow: frozenset[str]) -> bool:
        """`expr` gives a pandas object derived by pandas (`pd.read_csv(...)`, `df.rename(...)`, `df[cols]`)."""
        if isinstance(expr, ast.Call):
            name = self.qualified(expr.func)
            if name is not None and name.split(".")[0] in cow:
                return True
            expr = expr.func.value if isinstance(expr.func, ast.Attribute) else expr.func
        elif isinstance(expr, ast.Subscript):
            expr = expr.value
        else:
            return False
        while isinstance(expr, (ast.Attribute, ast.Subscript, ast.Call)):
            expr = expr.func if isinstance(expr, ast.Call) else expr.value
        return isinstance(expr, ast.Name) and expr.id in frames

    def _derived_from_itself(self, value: ast.expr | None, name: str) -> bool:
        """`value` reads no local but `name` (`df = df.rename(columns=MAPPING)` after `df = df.copy()`): what it
        gives comes from the copy, not from the caller's objects."""
        if value is None or not (self.copied.get(name) == "deep" or name in self.frames):
            return False  # a shallow copy's items are the caller's: `cfg = cfg["model"]` is not the task's own
        return all(n.id == name or n.id not in self.local_names for n in ast.walk(value) if isinstance(n, ast.Name))

    def _copied_params(self) -> dict[str, str]:
        """Parameters whose first mention in the body is a top-level `p = <copy of p>`, with the kind of
        copy: "deep" (`copy.deepcopy(p)`, `p.clone()`, `np.copy(p)`) or "shallow" (`p.copy()`, `dict(p)`,
        `list(p)`: a new container whose items are still the caller's)."""
        found: dict[str, str] = {}
        mentioned: set[str] = set()
        for stmt in self.fn.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                kind = self._copy_kind(stmt.value, name)
                if kind is not None and name in self.params and name not in mentioned:
                    found[name] = kind
            mentioned |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        # a later rebinding to something else makes the name a plain local again (flow-insensitive from here on)
        for node in self.body_nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in found:
                owner = next((s for s in self.fn.body if isinstance(s, ast.Assign) and s.targets[0] is node), None)
                if owner is None:
                    found.pop(node.id)
        return found

    def _copy_kind(self, value: ast.expr, name: str) -> str | None:
        """"deep" or "shallow" when `value` copies the object `name` holds, else None."""
        if not isinstance(value, ast.Call):
            return None
        func, args = value.func, value.args
        on_name = lambda expr: isinstance(expr, ast.Name) and expr.id == name  # noqa: E731
        if isinstance(func, ast.Attribute) and not args:
            if func.attr == "clone" and on_name(func.value):
                return "deep"
            if func.attr == "clone" and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Attribute) \
                    and func.value.func.attr == "detach" and on_name(func.value.func.value):
                return "deep"  # `x.detach().clone()`
            if func.attr == "copy" and on_name(func.value):
                deep = any(k.arg == "deep" and isinstance(k.value, ast.Constant) and k.value.value is True
                           for k in value.keywords)
                return "deep" if deep else "shallow"
        if len(args) != 1 or not on_name(args[0]):
            return None
        qualified = self.qualified(func)
        if qualified in lib.DEEP_COPIES:
            return "deep"
        if qualified == "copy.copy" or isinstance(func, ast.Name) and func.id in lib.SHALLOW_COPIES \
                and not self.shadowed(func.id):
            return "shallow"
        return None

