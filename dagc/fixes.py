"""Machine-applicable fixes: the source edits a diagnostic proposes, as data.

A diagnostic whose hint names one exact edit (the option to set on a task's decorator, the import or
decorator to add, the statement to move) carries a `Fix`: a short summary and the edits that make it.
Each edit names the code it changes by where that code starts (`at`: file, 1-based line and column, as
in every `SourceSpan`); `dagc fix` (dagc.apply_fixes) finds those nodes with libcst and rewrites only
them, so formatting and comments elsewhere stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from dagc.ir.location import SourceSpan

__all__ = ["AddArguments", "AddDecorator", "DropAsync", "Edit", "Fix", "GuardStatement", "InsertStatement",
           "MoveDefinition", "MoveStatement", "ReplaceExpression", "SetOption"]


@dataclass(frozen=True)
class SetOption:
    """Set keyword `option` of the decorator expression starting at `at` to the Python expression `value`
    (`None` removes the keyword; a bare `@dagc.task` becomes a call, a call left without arguments bare)."""

    at: SourceSpan
    option: str
    value: str | None


@dataclass(frozen=True)
class AddDecorator:
    """Add `@{text}` above the decorators of the function or class whose `def`/`class` starts at `at` (with
    `innermost`, below them, just above the `def`: `@staticmethod` under `@dagc.task`)."""

    at: SourceSpan
    text: str
    innermost: bool = False


@dataclass(frozen=True)
class InsertStatement:
    """Insert the module-level statement `text` after the top-level statement that starts on line `at.line`
    (line 0: before the first statement, below the file's header comments)."""

    at: SourceSpan
    text: str


@dataclass(frozen=True)
class MoveStatement:
    """Move the one-statement line starting at `at`, with the comments above it, to module level just above
    the top-level statement that starts on line `before`."""

    at: SourceSpan
    before: int


@dataclass(frozen=True)
class ReplaceExpression:
    """Replace the expression spanning exactly `at` (start and end) with the Python expression `text`."""

    at: SourceSpan
    text: str


@dataclass(frozen=True)
class MoveDefinition:
    """Move the function whose `def` starts at `at` out of the function that defines it, with its decorators and
    the comments above it, to module level just above the top-level statement that starts on line `before`;
    `params` (names it read from the enclosing function) become its last parameters (keyword-only when it
    has defaults or `*args`)."""

    at: SourceSpan
    before: int
    params: tuple[str, ...] = ()


@dataclass(frozen=True)
class AddArguments:
    """Pass each of `names` by keyword, as itself (`lr=lr`), to the call spanning exactly `at`."""

    at: SourceSpan
    names: tuple[str, ...]


@dataclass(frozen=True)
class GuardStatement:
    """Put the top-level statement starting at `at` under `if __name__ == "__main__":` (statements next to
    each other share one guard)."""

    at: SourceSpan


@dataclass(frozen=True)
class DropAsync:
    """Make the `async def` starting at `at` a plain `def`."""

    at: SourceSpan


Edit = (SetOption | AddDecorator | InsertStatement | MoveStatement | ReplaceExpression | MoveDefinition
        | AddArguments | GuardStatement | DropAsync)

_KINDS: dict[type, str] = {SetOption: "set-option", AddDecorator: "add-decorator",
                           InsertStatement: "insert-statement", MoveStatement: "move-statement",
                           ReplaceExpression: "replace-expression", MoveDefinition: "move-definition",
                           AddArguments: "add-arguments", GuardStatement: "guard-statement",
                           DropAsync: "drop-async"}


@dataclass(frozen=True)
class Fix:
    """What `dagc fix` changes for one diagnostic: `summary` says it in a few words (`add \\`import dagc\\``)."""

    summary: str
    edits: tuple[Edit, ...]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(edit.at.file for edit in self.edits))

    def to_json(self) -> dict[str, object]:
        def edit_json(edit: Edit) -> dict[str, object]:
            data: dict[str, object] = {"kind": _KINDS[type(edit)]}
            for item in fields(edit):
                value = getattr(edit, item.name)
                data[item.name] = value.text() if isinstance(value, SourceSpan) else value
            return data

        return {"summary": self.summary, "edits": [edit_json(e) for e in self.edits]}
