"""Reading and parsing one source file, and turning ast positions into `SourceSpan`s."""

from __future__ import annotations

import ast
import hashlib
import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from dagc.diagnostics import DiagnosticSink
from dagc.ir.location import SourceSpan

__all__ = ["SOURCE_TEXTS", "SourceFile", "read_source", "name_span"]

# texts that stand in for files on disk, by resolved path: `dagc fix` compiles its edits before (or without,
# under --diff) writing them
SOURCE_TEXTS: ContextVar[Mapping[Path, str] | None] = ContextVar("SOURCE_TEXTS", default=None)


@dataclass
class SourceFile:
    """A parsed file. `display` is the path as shown to the user (relative to where they ran dagc)."""

    path: Path
    display: str
    text: str
    tree: ast.Module
    _lines: list[str] | None = field(default=None, repr=False)
    _ascii: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._ascii = self.text.isascii()

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def _char_col(self, line: int, byte_col: int) -> int:
        # ast columns are UTF-8 byte offsets; users count characters
        if self._ascii or line < 1 or line > len(self.lines):
            return byte_col
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> SourceSpan:
        try:
            line: int = node.lineno  # type: ignore[attr-defined]
            col: int = node.col_offset  # type: ignore[attr-defined]
            end_line: int | None = node.end_lineno  # type: ignore[attr-defined]
            end_col: int | None = node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:  # a node without a position (a module, an argument list)
            line = getattr(node, "lineno", 1)
            col = getattr(node, "col_offset", 0)
            end_line = getattr(node, "end_lineno", None)
            end_col = getattr(node, "end_col_offset", None)
        end_line = end_line or line
        end_col = col + 1 if end_col is None else end_col
        if self._ascii:  # (most files: byte offsets are character offsets)
            return SourceSpan(self.display, line, col + 1, end_line, end_col + 1)
        return SourceSpan(self.display, line, self._char_col(line, col) + 1, end_line,
                          self._char_col(end_line, end_col) + 1)

def name_span(source: SourceFile, fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> SourceSpan:
    """The span of the name in `def name(` — where a note about a definition should point."""
    line = source.lines[fn.lineno - 1] if 0 < fn.lineno <= len(source.lines) else ""
    start = line.find(fn.name, fn.col_offset)
    if start < 0:
        return source.span(fn)
    col = len(line[:start]) + 1
    return SourceSpan(source.display, fn.lineno, col, fn.lineno, col + len(fn.name))


def read_source(path: Path, display: str, sink: DiagnosticSink) -> SourceFile | None:
    """Read, decode and parse `path`; on failure report DAGC001/DAGC002 and return None."""
    try:
        given = SOURCE_TEXTS.get()
        text_given = given.get(path.resolve()) if given else None
        raw = path.read_bytes() if text_given is None else text_given.encode("utf-8")
    except OSError as exc:
        sink.error("DAGC002", f"cannot read {display}: {exc.strerror or exc}", None,
                   hint="check the path and its permissions")
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        sink.error("DAGC002", f"{display} is not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
                   SourceSpan(display, line, col, line, col + 1),
                   hint="save the file as UTF-8, as Python source files are by default")
        return None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        sink.error("DAGC002", f"{display} contains a NUL byte", SourceSpan(display, line, 1),
                   hint="this does not look like a Python source file")
        return None
    key = (display, hashlib.blake2b(raw, digest_size=16).digest())
    cached = _PARSED.pop(key, None)
    if cached is not None:
        _PARSED[key] = cached  # (most recently used last)
        return SourceFile(path, display, text, cached)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences: not our concern
            tree = ast.parse(text, filename=display)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        end_line = exc.end_lineno or line
        end_col = exc.end_offset if exc.end_offset and end_line == line and exc.end_offset > col else col + 1
        sink.error("DAGC001", f"syntax error: {exc.msg}", SourceSpan(display, line, col, end_line, end_col),
                   hint="dagc reads the file as Python 3 source; fix the syntax so that `python` accepts it")
        return None
    except (RecursionError, MemoryError):
        sink.error("DAGC001", f"{display} is nested too deeply to parse", SourceSpan(display, 1, 1),
                   hint="flatten the deepest expression or block")
        return None
    except ValueError as exc:  # e.g. source with surrogates
        sink.error("DAGC002", f"cannot parse {display}: {exc}", SourceSpan(display, 1, 1))
        return None
    _PARSED[key] = tree
    while len(_PARSED) > _PARSED_KEPT:
        del _PARSED[next(iter(_PARSED))]
    return SourceFile(path, display, text, tree)


# the trees of the files parsed last, by path as shown and content: `dagc check` lists a script's pipelines and
# then compiles it, which parsed a 30,000-line script twice (a third of its time). Nothing changes a tree.
_PARSED: dict[tuple[str, bytes], ast.Module] = {}
_PARSED_KEPT = 4
