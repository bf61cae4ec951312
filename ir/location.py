"""Source locations: every IR node points back at the user's code."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SourceSpan"]

_SPAN_RE = re.compile(r"^(.+):(\d+):(\d+)(?:-(\d+):(\d+))?$")


@dataclass(frozen=True, slots=True, order=True)
class SourceSpan:
    """A range in a source file. Lines and columns are 1-based, columns count characters.

    `file` is the path as the user sees it (relative to the graph's source root when it has one).
    `end_line`/`end_col` are inclusive of the last character's successor, like Python's ast.
    """

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def text(self) -> str:
        """Compact `file:line:col-end_line:end_col` form used by the IR text format."""
        if self.end_line and (self.end_line, self.end_col) != (self.line, self.col):
            return f"{self.file}:{self.line}:{self.col}-{self.end_line}:{self.end_col}"
        return str(self)

    @classmethod
    def parse(cls, text: str) -> SourceSpan:
        """Inverse of `text()`. The file part may itself contain colons."""
        match = _SPAN_RE.match(text)
        if match is None:
            raise ValueError(f"malformed source span {text!r}: expected file:line:col[-line:col]")
        file, line, col, end_line, end_col = match.groups()
        return cls(file, int(line), int(col), int(end_line or 0), int(end_col or 0))

    def to_json(self) -> list[object]:
        return [self.file, self.line, self.col, self.end_line, self.end_col]

    @classmethod
    def from_json(cls, data: list[object]) -> SourceSpan:
        file, line, col, end_line, end_col = data
        return cls(str(file), int(line), int(col), int(end_line), int(end_col))  # type: ignore[arg-type]
