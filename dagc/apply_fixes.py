"""Applying fixes' edits (dagc.fixes) to a source text with libcst.

The text is parsed into a concrete syntax tree, which keeps every space, comment and parenthesis; one
transformer, keyed by source position (libcst's `PositionProvider`), rewrites only the nodes an edit
names, and the tree prints back the rest byte for byte. An edit whose node is not found (the file
changed since it was compiled) is returned as not applied rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from dagc.fixes import (
    AddArguments,
    AddDecorator,
    DropAsync,
    Edit,
    GuardStatement,
    InsertStatement,
    MoveDefinition,
    MoveStatement,
    ReplaceExpression,
    SetOption,
)

__all__ = ["Applied", "apply_edits"]

Position = tuple[int, int]  # 1-based line and column, as in SourceSpan


@dataclass(frozen=True)
class Applied:
    """The new text, and the edits whose code was not found in the old one."""

    text: str
    missed: tuple[Edit, ...]


def apply_edits(text: str, edits: Sequence[Edit]) -> Applied:
    """`text` with `edits` made (all of them in one file). Raises libcst.ParserSyntaxError on text that does
    not parse (the caller compiled it first, so it does)."""
    if not edits:
        return Applied(text, ())
    wrapper = MetadataWrapper(cst.parse_module(text))
    transformer = _EditTransformer(edits)
    module = wrapper.visit(transformer)
    missed = tuple(edit for edit in edits if id(edit) not in transformer.done)
    return Applied(module.code, missed)


def _start(edit: Edit) -> Position:
    return edit.at.line, edit.at.col


class _EditTransformer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: Sequence[Edit]) -> None:
        super().__init__()
        self.edits = list(edits)
        self.done: set[int] = set()
        self.moved: list[tuple[int, cst.BaseStatement]] = []  # (line to go above, the statement)
        self.left: dict[int, list[cst.EmptyLine]] = {}  # definitions moved out of a block: their blank lines
        self.taken: set[int] = set()  # statement lines moved out of a block

    def _pending(self, kind: type, at: Position) -> list[Edit]:
        return [e for e in self.edits if isinstance(e, kind) and _start(e) == at and id(e) not in self.done]

    def _position(self, node: cst.CSTNode) -> tuple[Position, Position]:
        found = self.get_metadata(PositionProvider, node)
        return (found.start.line, found.start.column + 1), (found.end.line, found.end.column + 1)

    # ---- options of a decorator ------------------------------------------------------------------
    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        start, _ = self._position(original_node.decorator)
        expr = updated_node.decorator
        for edit in self._pending(SetOption, start):
            assert isinstance(edit, SetOption)
            expr = _set_keyword(expr, edit.option, edit.value)
            self.done.add(id(edit))
        return updated_node.with_changes(decorator=expr)

    # ---- definitions: decorators, `async`, a move out of the function that defines them ------------
    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef | cst.RemovalSentinel:
        updated = self._decorate(original_node, updated_node)
        assert isinstance(updated, cst.FunctionDef)
        start, _ = self._position(original_node)
        for edit in self._pending(DropAsync, start):
            self.done.add(id(edit))
            updated = updated.with_changes(asynchronous=None)
        for edit in self._pending(MoveDefinition, start):
            assert isinstance(edit, MoveDefinition)
            self.done.add(id(edit))
            self.moved.append((edit.before, updated.with_changes(params=_with_params(updated.params, edit.params))))
            self.left[id(original_node)] = _blank_prefix(original_node.leading_lines)
            return cst.RemoveFromParent()
        return updated

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock,
                            updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        """The statement after a definition moved out keeps the blank lines the definition had above it (none,
        first in its block), not those that separated it from the definition."""
        if not any(id(stmt) in self.left for stmt in original_node.body):
            return updated_node
        kept = iter(updated_node.body)
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] | None = None
        for stmt in original_node.body:
            if id(stmt) in self.left:
                carried = self.left[id(stmt)] if carried is None else carried
                continue
            if id(stmt) in self.taken:
                continue
            new = next(kept)
            if carried is not None:
                own = list(getattr(new, "leading_lines", ()))
                new = new.with_changes(leading_lines=[*carried, *own[len(_blank_prefix(own)):]])
                carried = None
            body.append(new)
        return updated_node.with_changes(body=body)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return self._decorate(original_node, updated_node)

    def _decorate(self, original: cst.FunctionDef | cst.ClassDef, updated: _Def) -> _Def:
        start, _ = self._position(original)
        outer, inner = [], []
        for edit in self._pending(AddDecorator, start):
            assert isinstance(edit, AddDecorator)
            (inner if edit.innermost else outer).append(cst.Decorator(decorator=cst.parse_expression(edit.text)))
            self.done.add(id(edit))
        if not (outer or inner):
            return updated
        return updated.with_changes(decorators=[*outer, *updated.decorators, *inner])

    # ---- arguments of a call ---------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        start, end = self._position(original_node)
        call = updated_node
        for edit in self._pending(AddArguments, start):
            assert isinstance(edit, AddArguments)
            if end == (edit.at.end_line, edit.at.end_col):
                self.done.add(id(edit))
                for name in edit.names:
                    call = _with_keyword(call, name, cst.Name(name))
        return call

    # ---- expressions -----------------------------------------------------------------------------
    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:
        result = super().on_leave(original_node, updated_node)
        if isinstance(original_node, cst.BaseExpression) and isinstance(result, cst.BaseExpression):
            start, end = self._position(original_node)
            for edit in self._pending(ReplaceExpression, start):
                assert isinstance(edit, ReplaceExpression)
                if end == (edit.at.end_line, edit.at.end_col):
                    self.done.add(id(edit))
                    return cst.parse_expression(edit.text).with_changes(lpar=result.lpar, rpar=result.rpar)
        return result

    # ---- statements ------------------------------------------------------------------------------
    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine
                                  ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        start, _ = self._position(original_node)
        for edit in self._pending(MoveStatement, start):
            assert isinstance(edit, MoveStatement)
            if len(updated_node.body) != 1:
                continue
            self.done.add(id(edit))
            self.moved.append((edit.before, updated_node))
            self.taken.add(id(original_node))
            return cst.RemoveFromParent()
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if len(original_node.body) != len(updated_node.body):  # (only nested statements are moved)
            return updated_node
        starts = [self._position(stmt)[0] for stmt in original_node.body]
        inserts = [e for e in self.edits if isinstance(e, InsertStatement) and id(e) not in self.done]
        guards = {_start(e): e for e in self.edits if isinstance(e, GuardStatement) and id(e) not in self.done}
        body: list[cst.BaseStatement] = []
        for edit in inserts:
            if edit.at.line == 0:
                body.append(cst.parse_statement(edit.text))
                self.done.add(id(edit))
        guarded: cst.If | None = None  # the guard the statement just above went under
        for start, stmt in zip(starts, updated_node.body):
            line = start[0]
            for before, moved in self.moved:
                if before == line:
                    placed, stmt = _place_above(stmt, moved)
                    body.append(placed)
                    guarded = None
            guard = guards.get(start)
            if guard is not None and isinstance(stmt, cst.SimpleStatementLine):
                self.done.add(id(guard))
                if guarded is not None and body and body[-1] is guarded:
                    guarded = _guard_with(guarded, stmt)
                    body[-1] = guarded
                else:
                    guarded = _guard(stmt)
                    body.append(guarded)
            else:
                body.append(stmt)
                guarded = None
            for edit in inserts:
                if edit.at.line == line and id(edit) not in self.done:
                    body.append(cst.parse_statement(edit.text))
                    self.done.add(id(edit))
                    guarded = None
        lines = [start[0] for start in starts]
        placed = {id(m) for before, m in self.moved if before in lines}
        if len(placed) < len(self.moved):  # its place is gone: keep the file as it was
            self.done -= {id(e) for e in self.edits if isinstance(e, (MoveStatement, MoveDefinition))}
            return original_node
        return updated_node.with_changes(body=body)


_Def = cst.FunctionDef | cst.ClassDef


def _place_above(stmt: cst.BaseStatement, moved: cst.BaseStatement) -> tuple[cst.BaseStatement, cst.BaseStatement]:
    """`moved` and `stmt`, for `moved` to go just above `stmt` and the comments right above it: what comes before
    the blank lines that separate those comments from the code above (the end of the previous definition's
    comments, say) stays above `moved`, and both get those blank lines: `def f(): ...`, two blank lines, the
    moved statement, two blank lines, `stmt`. The moved statement keeps the comments above it, not the blank
    lines that separated it from its old neighbours."""
    leading = list(getattr(stmt, "leading_lines", ()))
    attached = len(leading)  # where the comments right above `stmt` start
    while attached and leading[attached - 1].comment is not None:
        attached -= 1
    separator = attached
    while separator and leading[separator - 1].comment is None:
        separator -= 1
    own = [line.with_changes(indent=True) for line in getattr(moved, "leading_lines", ())]
    placed = moved.with_changes(leading_lines=[*leading[:attached], *own[len(_blank_prefix(own)):]])
    return placed, stmt.with_changes(leading_lines=leading[separator:])


def _blank_prefix(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The blank lines before the first comment of `lines`."""
    blank = []
    for line in lines:
        if line.comment is not None:
            break
        blank.append(line)
    return blank


_MAIN_TEST = '__name__ == "__main__"'


def _guard(stmt: cst.SimpleStatementLine) -> cst.If:
    """`stmt` under `if __name__ == "__main__":`, the comments and blank lines above it kept above the `if`."""
    return cst.If(test=cst.parse_expression(_MAIN_TEST), leading_lines=stmt.leading_lines,
                  body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]))


def _guard_with(guard: cst.If, stmt: cst.SimpleStatementLine) -> cst.If:
    body = guard.body
    assert isinstance(body, cst.IndentedBlock)
    lines = [line.with_changes(indent=True) for line in stmt.leading_lines]
    return guard.with_changes(body=body.with_changes(body=[*body.body, stmt.with_changes(leading_lines=lines)]))


def _with_params(params: cst.Parameters, names: Sequence[str]) -> cst.Parameters:
    """`params` with `names` added last: as plain parameters, or keyword-only ones after a default or `*args`
    (where a plain one could not follow)."""
    if not names:
        return params
    new = [cst.Param(name=cst.Name(name)) for name in names]
    plain = isinstance(params.star_arg, cst.MaybeSentinel) and not params.kwonly_params \
        and params.star_kwarg is None and all(p.default is None for p in [*params.posonly_params, *params.params])
    if plain:
        return params.with_changes(params=[*params.params, *new])
    star = cst.ParamStar() if isinstance(params.star_arg, cst.MaybeSentinel) else params.star_arg
    return params.with_changes(star_arg=star, kwonly_params=[*params.kwonly_params, *new])


def _set_keyword(expr: cst.BaseExpression, option: str, value: str | None) -> cst.BaseExpression:
    """`expr` (a decorator: `dagc.task` or `dagc.task(...)`) with keyword `option` set to `value` (source
    text), or removed when `value` is None."""
    call = expr if isinstance(expr, cst.Call) else None
    args = list(call.args) if call is not None else []
    index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == option), None)
    if value is None:
        if index is None:
            return expr
        last = index == len(args) - 1
        del args[index]
        if not args:
            return call.func if call is not None else expr  # `@dagc.task()` → `@dagc.task`
        if last:  # the new last argument ends the call as the removed one did (with or without a comma)
            args[-1] = args[-1].with_changes(comma=call.args[index].comma) if call is not None else args[-1]
        assert call is not None
        return call.with_changes(args=args)
    parsed = cst.parse_expression(value)
    if index is not None:
        args[index] = args[index].with_changes(value=parsed)
        assert call is not None
        return call.with_changes(args=args)
    if call is None:
        return cst.Call(func=expr, args=[_keyword_arg(option, parsed)])
    return _with_keyword(call, option, parsed)


def _keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=value, keyword=cst.Name(name), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))


def _with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` added last, in the call's layout."""
    args = list(call.args)
    new = _keyword_arg(name, value)
    if args and isinstance(args[-1].comma, cst.Comma):  # a trailing comma (one argument a line): keep the style
        trailing = args[-1].comma
        args[-1] = args[-1].with_changes(comma=trailing.with_changes(whitespace_after=call.whitespace_before_args))
        new = new.with_changes(comma=trailing)
    elif args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new])
