"""`glue` nodes: arithmetic, comparisons, indexing, attribute access and f-strings on run-time values."""

from __future__ import annotations

import ast
import builtins

from dagc.frontend.extract.context import Component
from dagc.frontend.extract.messages import describe
from dagc.frontend.extract.options import configured_callee
from dagc.frontend.extract.queries import generator_as_list, target_names
from dagc.frontend.extract.values import (
    Callee,
    ClassValue,
    Dyn,
    ExtractError,
    Scope,
    Static,
    Value,
    const_value,
    is_task_result,
    to_operand,
    value_of,
)
from dagc.frontend.forms import GLUE_CALLS, as_literal
from dagc.frontend.modules import ImportedModule, ModuleInfo, Opaque, PipelineDef, TaskDef
from dagc.ir.core import Node
from dagc.ir.facts import Effects
from dagc.ir.types import Const, Map, Operand, Ref, Seq, iter_refs, operand_from_python

GLUE_EXPRS = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Subscript, ast.Attribute, ast.JoinedStr,
              ast.IfExp, ast.Set, ast.SetComp, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom,
              ast.Starred)


PY_BUILTINS = frozenset(dir(builtins))


_GLUE_NAMES = {
    ast.UnaryOp: "unary",
    ast.BoolOp: "boolop",
    ast.Compare: "compare",
    ast.Subscript: "getitem",
    ast.Attribute: "getattr",
    ast.JoinedStr: "format",
    ast.IfExp: "select",
}


_BINOP_NAMES = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "and", ast.BitOr: "or",
    ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift",
}


class Glue(Component):
    """Turns operations on run-time values into `glue` nodes, and says which expressions need one."""

    def is_task_callee(self, func: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        configured = configured_callee(func, info)  # `train.options(memory=...)(x)` inside an expression
        if configured is not None:  # (`dagc.task(...)(fn)` makes a task of any function)
            return configured[0] is not func or self.is_task_callee(configured[1], scope, info)
        if isinstance(func, ast.Name):
            if func.id in scope.env:
                return isinstance(scope.env[func.id], Callee)
            symbol = self.cx.project.lookup(info, func.id)
            return isinstance(symbol, (TaskDef, PipelineDef))
        if isinstance(func, ast.Attribute):
            parts = []
            node: ast.expr = func
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and isinstance(scope.env.get(node.id), ClassValue):
                return True
            if isinstance(node, ast.Name) and node.id not in scope.env:
                symbol = self.cx.project.lookup(info, node.id)
                if isinstance(symbol, ImportedModule) and self.cx.project.is_user_module(symbol.module):
                    return True
                if isinstance(symbol, Opaque) and symbol.steps is not None and symbol.steps.members:
                    return True
        return False

    def needs_glue(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> bool:
        """True when `expr` reads a task result (a name bound to one, or a task call inside it)."""
        stack: list[ast.AST] = [expr]
        local: set[str] = set()
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                if node.id not in local and is_task_result(scope.env.get(node.id)):
                    return True
                if node.id not in local and node.id not in scope.env and node.id not in scope.assigned_later \
                        and self.cx.exprs.is_module_object(node.id, info):
                    return True  # read where a task runs (Expressions.module_object)
            elif isinstance(node, ast.Call) and self.is_task_callee(node.func, scope, info):
                return True
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for gen in node.generators:
                    local |= target_names(gen.target)
            elif isinstance(node, ast.Lambda):
                local |= {a.arg for a in node.args.args}
            stack.extend(ast.iter_child_nodes(node))
        return False

    def _static_subscript(self, expr: ast.expr, scope: Scope, info: ModuleInfo) -> Value | None:
        """`xs[2]` or `d["k"]` where the container is a literal list/tuple/dict of values built in the
        pipeline and the index is a compile-time constant: the item itself, so that no glue node (and
        no false dependency on the other items) is created."""
        # only a named container: evaluating any other expression here would build nodes twice
        if not isinstance(expr, ast.Subscript) or not isinstance(expr.value, ast.Name):
            return None
        if isinstance(expr.slice, ast.Slice) or self.needs_glue(expr.slice, scope, info):
            return None
        container = self.cx.exprs.name_value(expr.value, scope, info)
        if isinstance(container, tuple):
            items: list[Value] | None = list(container)
        elif isinstance(container, Dyn) and isinstance(container.operand, Seq):
            items = [value_of(i) for i in container.operand.items]
        elif isinstance(container, Dyn) and isinstance(container.operand, Map):
            key = self.cx.exprs.static_value(expr.slice, scope, info)
            for k, v in container.operand.items:
                if isinstance(k, Const) and k.value == key and type(k.value) is type(key):
                    return value_of(v)
            return None
        else:
            return None
        index = self.cx.exprs.static_value(expr.slice, scope, info)
        if isinstance(index, bool) or not isinstance(index, int) or not -len(items) <= index < len(items):
            return None
        return items[index]

    def printed(self, call: ast.Call, scope: Scope, info: ModuleInfo) -> Value:
        """`print(...)` in a pipeline body, of task results or constants: a glue node that prints where it
        runs, ordered with the pipeline's other effects on the world as the plain run orders them."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg not in ("sep", "end", "flush") for k in call.keywords):
            self.cx.sink.error("DAGC109", "only `print(values..., sep=, end=, flush=)` prints in a pipeline body",
                               info.source.span(call), hint="print to a file or a logger inside a task")
            raise ExtractError
        return self.glue(call, scope, info, prints=True)

    def glue(self, expr: ast.expr, scope: Scope, info: ModuleInfo, *, prints: bool = False) -> Value:
        direct = None if prints else self._static_subscript(expr, scope, info)
        if direct is not None:
            return direct
        args: list[Operand] = []

        def placeholder(operand: Operand) -> ast.expr:
            if operand in args:
                return ast.Name(f"_{args.index(operand)}", ast.Load())
            args.append(operand)
            return ast.Name(f"_{len(args) - 1}", ast.Load())

        def conv(e: ast.expr) -> ast.expr:
            if isinstance(e, ast.FormattedValue) and not self.needs_glue(e, scope, info):
                # `{iter_num}` beside `{loss:.4f}`: formatted now, a literal piece of the f-string
                return ast.Constant(str(self.cx.exprs.static_value(ast.JoinedStr([e]), scope, info)))
            if not (prints and e is expr) and not self.needs_glue(e, scope, info):
                if isinstance(e, ast.Slice):
                    return ast.Slice(*(conv(p) if p is not None else None for p in (e.lower, e.upper, e.step)))
                value = self.cx.exprs.static_value(e, scope, info)
                if isinstance(value, (bool, int, str)) or value is None or (
                        isinstance(value, float) and value == value and abs(value) != float("inf")):
                    return ast.Constant(value)
                try:
                    return placeholder(operand_from_python(value))
                except TypeError:
                    self.cx.exprs.not_a_value(e, info)
                    raise
            if isinstance(e, ast.Name):
                value = self.cx.exprs.name_value(e, scope, info)
                try:
                    return placeholder(to_operand(value))
                except TypeError:
                    self.cx.exprs.not_a_value(e, info)
                    raise
            if isinstance(e, ast.Call) and (self.is_glue_call(e, scope) or prints and e is expr):
                literal = as_literal(e)  # `tuple([a, b])` is `(a, b)`: emitted code stays lint-clean
                if literal is not None:
                    return conv(literal)
                return ast.Call(ast.Name(e.func.id, ast.Load()),  # type: ignore[attr-defined]
                                [conv(generator_as_list(e, a)) for a in e.args],
                                [ast.keyword(k.arg, conv(k.value)) for k in e.keywords])
            if isinstance(e, (ast.ListComp, ast.DictComp)):  # `sum([grad(w, s) for s in shards])`
                return placeholder(to_operand(self.cx.exprs.comprehension(e, scope, info)))
            if isinstance(e, ast.Call):
                value = self.cx.exprs.eval(e, scope, info)
                return placeholder(to_operand(value))
            if isinstance(e, ast.BinOp):
                return ast.BinOp(conv(e.left), e.op, conv(e.right))
            if isinstance(e, ast.UnaryOp):
                return ast.UnaryOp(e.op, conv(e.operand))
            if isinstance(e, ast.BoolOp):
                return ast.BoolOp(e.op, [conv(v) for v in e.values])
            if isinstance(e, ast.Compare):
                return ast.Compare(conv(e.left), e.ops, [conv(c) for c in e.comparators])
            if isinstance(e, ast.IfExp):
                return ast.IfExp(conv(e.test), conv(e.body), conv(e.orelse))
            if isinstance(e, ast.Subscript):
                return ast.Subscript(conv(e.value), conv(e.slice), ast.Load())
            if isinstance(e, ast.Slice):
                return ast.Slice(*(conv(p) if p is not None else None for p in (e.lower, e.upper, e.step)))
            if isinstance(e, ast.Attribute):
                if e.attr.startswith("__"):
                    self.cx.sink.error("DAGC109", f"dunder attribute `.{e.attr}` of a task result is not supported",
                                       info.source.span(e), hint="read it inside a task")
                    raise ExtractError
                return ast.Attribute(conv(e.value), e.attr, ast.Load())
            if isinstance(e, ast.JoinedStr):
                return ast.JoinedStr([conv(v) for v in e.values])
            if isinstance(e, ast.FormattedValue):
                spec = None
                if e.format_spec is not None:
                    if self.needs_glue(e.format_spec, scope, info):
                        spec = conv(e.format_spec)
                    else:
                        spec = ast.JoinedStr([ast.Constant(str(self.cx.exprs.static_value(e.format_spec, scope, info)))])
                return ast.FormattedValue(conv(e.value), e.conversion, spec)
            if isinstance(e, (ast.Tuple, ast.List)):
                if any(isinstance(x, ast.Starred) for x in e.elts):
                    self.cx.exprs.not_a_value(e, info)
                return type(e)([conv(x) for x in e.elts], ast.Load())
            if isinstance(e, ast.Dict):
                if any(k is None for k in e.keys):
                    self.cx.exprs.not_a_value(e, info)
                return ast.Dict([conv(k) for k in e.keys if k is not None], [conv(v) for v in e.values])
            self.cx.sink.error("DAGC109", f"{describe(e)} on a task result is not supported in a pipeline body",
                               info.source.span(e),
                               hint="pipeline bodies support arithmetic, comparisons, indexing, attribute access "
                               "and f-strings on task results; do anything else inside a task")
            raise ExtractError

        new = conv(expr)
        if not prints and isinstance(new, ast.Name) and new.id == "_0" and len(args) == 1:
            return Dyn(args[0]) if any(True for _ in iter_refs(args[0])) else Static(const_value(args[0]))
        text = ast.unparse(ast.fix_missing_locations(new))
        base = _GLUE_NAMES.get(type(expr), "glue")
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            base = expr.func.id
        if isinstance(expr, ast.BinOp):
            base = _BINOP_NAMES.get(type(expr.op), "arith")
        name = self.cx.node_name(scope.prefix + base + scope.suffix)
        node = Node(name, "glue", text, tuple(args), (), (name,), (None,), span=info.source.span(expr),
                    deps=tuple(self.cx.take_extra_deps()))
        if prints:
            node.effects = Effects(output=f"prints ({info.source.display}:{expr.lineno})")
        self.cx.add_node(node)
        return Dyn(Ref(name))

    def is_glue_call(self, call: ast.Call, scope: Scope) -> bool:
        """A call of an unshadowed builtin that glue may compute: no `*args`/`**kwargs`."""
        func = call.func
        return (isinstance(func, ast.Name) and func.id in GLUE_CALLS and func.id not in scope.env
                and func.id not in scope.assigned_later and self.cx.project.lookup(scope.pipeline.info, func.id) is None
                and not any(isinstance(a, ast.Starred) for a in call.args)
                and all(k.arg is not None for k in call.keywords))
