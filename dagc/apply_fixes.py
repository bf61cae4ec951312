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

from dagc.fixes import AddDecorator, Edit, InsertStatement, MoveStatement, ReplaceExpression, SetOption

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
        self.moved: list[tuple[int, cst.SimpleStatementLine]] = []  # (line to go above, the statement)

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

    # ---- decorators of a definition --------------------------------------------------------------
    def leave_FunctionDef(self, original_node: cst.FunctionDef,
                          updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return self._decorate(original_node, updated_node)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return self._decorate(original_node, updated_node)

    def _decorate(self, original: cst.FunctionDef | cst.ClassDef, updated: _Def) -> _Def:
        start, _ = self._position(original)
        added = []
        for edit in self._pending(AddDecorator, start):
            assert isinstance(edit, AddDecorator)
            added.append(cst.Decorator(decorator=cst.parse_expression(edit.text)))
            self.done.add(id(edit))
        return updated.with_changes(decorators=[*added, *updated.decorators]) if added else updated

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
            return cst.RemoveFromParent()
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if len(original_node.body) != len(updated_node.body):  # (only nested statements are moved)
            return updated_node
        lines = [self._position(stmt)[0][0] for stmt in original_node.body]
        inserts = [e for e in self.edits if isinstance(e, InsertStatement) and id(e) not in self.done]
        body: list[cst.BaseStatement] = []
        for edit in inserts:
            if edit.at.line == 0:
                body.append(cst.parse_statement(edit.text))
                self.done.add(id(edit))
        for line, stmt in zip(lines, updated_node.body):
            for before, moved in self.moved:
                if before == line:
                    body.append(_with_blank_lines_of(stmt, moved))
            body.append(stmt)
            for edit in inserts:
                if edit.at.line == line and id(edit) not in self.done:
                    body.append(cst.parse_statement(edit.text))
                    self.done.add(id(edit))
        placed = {id(m) for before, m in self.moved if before in lines}
        if len(placed) < len(self.moved):  # its place is gone: keep the file as it was
            self.done -= {id(e) for e in self.edits if isinstance(e, MoveStatement)}
            return original_node
        return updated_node.with_changes(body=body)


_Def = cst.FunctionDef | cst.ClassDef


def _with_blank_lines_of(stmt: cst.BaseStatement, moved: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
    """A statement moved above `stmt` gets the blank lines that separate `stmt` from what comes before, and
    `stmt` keeps its own: `def f(): ...`, two blank lines, the moved line, two blank lines, `stmt`."""
    leading = list(getattr(stmt, "leading_lines", ()))
    blank = []
    for line in leading:
        if line.comment is not None:
            break
        blank.append(line)
    own = [line.with_changes(indent=True) for line in moved.leading_lines]
    return moved.with_changes(leading_lines=[*blank, *own])


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
    new = cst.Arg(value=parsed, keyword=cst.Name(option), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if call is None:
        return cst.Call(func=expr, args=[new])
    if args and isinstance(args[-1].comma, cst.Comma):  # a trailing comma (one argument a line): keep the style
        trailing = args[-1].comma
        args[-1] = args[-1].with_changes(comma=trailing.with_changes(whitespace_after=call.whitespace_before_args))
        new = new.with_changes(comma=trailing)
    elif args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new])
