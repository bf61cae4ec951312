"""One diagnostic type, one catalogue of codes, one renderer.

Rendered like rustc/ruff:

    samples/bad.py:12:9: error[DAGC103]: task `train` has no parameter `lrate`
       |
    12 |     m = train(x, lrate=0.1)
       |                  ^^^^^^^^^
       = hint: `train` accepts: x, lr, epochs

User errors are collected (never raised one at a time) and never show a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from dagc.fixes import Fix
from dagc.ir.location import SourceSpan

__all__ = [
    "Severity",
    "Note",
    "Diagnostic",
    "Fix",
    "DiagnosticSink",
    "CompileError",
    "CODES",
    "render_text",
    "render_json",
    "has_errors",
]


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


# Every code the compiler can emit, with a one-line title. docs/diagnostics.md documents each one;
# a test keeps the two in sync.
CODES: dict[str, str] = {
    "DAGC001": "syntax error",
    "DAGC002": "source file cannot be read or decoded",
    "DAGC003": "no pipeline to compile",
    "DAGC004": "unknown or ambiguous pipeline name",
    "DAGC005": "bad compile-time parameter",
    "DAGC006": "input file kind not recognised",
    "DAGC007": "profile (run directory) cannot be used",
    "DAGC008": "cost store has damaged lines",
    "DAGC009": "script name is not a module name",
    "DAGC101": "undefined name",
    "DAGC102": "value used before it is produced",
    "DAGC103": "unknown keyword argument to a task",
    "DAGC104": "missing argument to a task",
    "DAGC105": "too many positional arguments",
    "DAGC106": "argument given twice",
    "DAGC107": "non-task call receives a task result",
    "DAGC108": "unsupported statement in a pipeline",
    "DAGC109": "unsupported expression in a pipeline",
    "DAGC110": "task used outside a pipeline",
    "DAGC111": "call of something that is not a task",
    "DAGC112": "unpacking does not match",
    "DAGC113": "recursive pipeline",
    "DAGC114": "task result used at compile time",
    "DAGC115": "pipeline returns nothing",
    "DAGC116": "loop over a value not known at compile time",
    "DAGC117": "unsupported loop or branch form",
    "DAGC118": "name in a loop or branch is not a value",
    "DAGC119": "loop unrolls too far",
    "DAGC120": "unknown task option",
    "DAGC121": "task option has the wrong type",
    "DAGC122": "bad unit in a task option",
    "DAGC123": "task option is not a compile-time constant",
    "DAGC124": "unsupported decorator form",
    "DAGC125": "file path cannot be resolved at compile time",
    "DAGC126": "two tasks write one file",
    "DAGC127": "file read before or without its writer",
    "DAGC128": "bad dagc.after call",
    "DAGC129": "task option value looks like the wrong unit",
    "DAGC130": "imported user module not found",
    "DAGC131": "name not found in user module",
    "DAGC132": "unsupported parameter kind",
    "DAGC133": "task or pipeline method needs an instance",
    "DAGC134": "module settings changed when the script runs",
    "DAGC135": "bad dagc.trips call",
    "DAGC136": "a reduction task must take one list of tensors",
    "DAGC140": "type mismatch between producer and consumer",
    "DAGC150": "task draws from the global random number generator without seeding it",
    "DAGC151": "discarded result of a call without effects",
    "DAGC152": "task removed: result unused and no effects",
    "DAGC153": "calls of a pure task merged",
    "DAGC154": "object built in the pipeline changed in place where dagc cannot track it",
    "DAGC155": "effect declaration contradicts the task's body",
    "DAGC156": "seed set under `if __name__ == \"__main__\":` that the compiled run would not see",
    "DAGC157": "tasks that do not use each other's results share a module-level object: one process, in order",
    "DAGC158": "an effect dagc assumes was never seen in a run (`dagc check --profile RUN_DIR`)",
    "DAGC159": "a task joins pieces of state other tasks change in place: one process, in order",
    "DAGC160": "task option the chosen backend ignores",
    "DAGC161": "multi-rank task: Ray and torch return rank 0's value",
    "DAGC162": "module reads a torchrun variable at import",
    "DAGC163": "a task did more in an earlier run than its code shows: dagc now assumes it",
    "DAGC164": "a task writes files at paths its call does not name: later file access waits for it",
    "DAGC165": "module-level random values drawn at import with no seed: their readers run in one process",
    "DAGC170": "bad dagc.each call",
    "DAGC171": "value carried from one item of a map to the next",
    "DAGC172": "collecting list read inside a map",
    "DAGC173": "map items appended or filtered on a task result",
    "DAGC174": "break or continue in a map",
    "DAGC175": "map item unpacked into something other than names",
    "DAGC176": "name bound in a map used after the loop",
    "DAGC180": "`except` in a pipeline",
    "DAGC181": "`finally` reads a value the `try` body assigns",
    "DAGC182": "`break`/`continue` inside `try`/`finally`",
    "DAGC183": "`except KeyboardInterrupt` in a pipeline: Ctrl-C stops a dagc run",
    "DAGC196": "a Kubeflow Pipelines construct dagc does not compile",
    "DAGC197": "a Kubeflow Pipelines task setting a dagc program does not use",
    "DAGC201": "cycle in the graph",
    "DAGC202": "input not bound to any value",
    "DAGC203": "value has more than one producer",
    "DAGC204": "invalid resources",
    "DAGC205": "malformed IR",
    "DAGC206": "missing source location",
    "DAGC301": "bad cluster specification",
    "DAGC302": "task does not fit on any device",
    "DAGC303": "bad pass pipeline",
    "DAGC304": "tasks sharing state cannot run in one process",
    "DAGC310": "communication order could deadlock",
    "DAGC311": "a sum becomes a reduce collective (its additions may run in another order)",
    "DAGC900": "internal compiler error",
}


@dataclass(frozen=True)
class Note:
    message: str
    span: SourceSpan | None = None


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: SourceSpan | None = None
    hint: str | None = None
    notes: tuple[Note, ...] = ()
    fix: Fix | None = None  # the edit the hint names, when dagc can make it (`dagc fix`)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unregistered diagnostic code {self.code}")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_json(self) -> dict[str, object]:
        def span_json(span: SourceSpan | None) -> dict[str, object] | None:
            if span is None:
                return None
            return {
                "file": span.file,
                "line": span.line,
                "col": span.col,
                "end_line": span.end_line,
                "end_col": span.end_col,
            }

        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "span": span_json(self.span),
            "hint": self.hint,
            "notes": [{"message": n.message, "span": span_json(n.span)} for n in self.notes],
            "fix": self.fix.to_json() if self.fix is not None else None,
        }


@dataclass
class DiagnosticSink:
    """Collects diagnostics; compilation goes on after an error so that all of them are reported."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def emit(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def error(
        self,
        code: str,
        message: str,
        span: SourceSpan | None = None,
        *,
        hint: str | None = None,
        notes: Iterable[Note] = (),
        fix: Fix | None = None,
    ) -> Diagnostic:
        diag = Diagnostic(code, Severity.ERROR, message, span, hint, tuple(notes), fix)
        self.emit(diag)
        return diag

    def warning(
        self,
        code: str,
        message: str,
        span: SourceSpan | None = None,
        *,
        hint: str | None = None,
        notes: Iterable[Note] = (),
        fix: Fix | None = None,
    ) -> Diagnostic:
        diag = Diagnostic(code, Severity.WARNING, message, span, hint, tuple(notes), fix)
        self.emit(diag)
        return diag

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def sorted(self) -> list[Diagnostic]:
        """Stable order: by file, line, column, then emission order."""

        def key(item: tuple[int, Diagnostic]) -> tuple[object, ...]:
            index, diag = item
            span = diag.span
            return (span is None, span.file if span else "", span.line if span else 0,
                    span.col if span else 0, index)

        return [d for _, d in sorted(enumerate(self.diagnostics), key=key)]


class CompileError(Exception):
    """Raised when user input has errors; carries every diagnostic found."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else None
        super().__init__(f"{first.code}: {first.message}" if first else "compile error")


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)


def _source_line(sources: Mapping[str, str], span: SourceSpan) -> str | None:
    text = sources.get(span.file)
    if text is None:
        return None
    lines = text.splitlines()
    if 1 <= span.line <= len(lines):
        return lines[span.line - 1].expandtabs(4)
    return None


def _render_snippet(sources: Mapping[str, str], span: SourceSpan, out: list[str]) -> None:
    line = _source_line(sources, span)
    if line is None:
        return
    gutter = " " * len(str(span.line))
    out.append(f"{gutter} |")
    out.append(f"{span.line} | {line}")
    start = max(span.col - 1, 0)
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    elif span.end_line > span.line:
        width = max(len(line) - start, 1)
    else:
        width = 1
    width = max(1, min(width, max(len(line) - start, 1)))
    out.append(f"{gutter} | {' ' * start}{'^' * width}")


def render_text(diagnostics: Iterable[Diagnostic], sources: Mapping[str, str] | None = None) -> str:
    """Human form: `path:line:col: error[CODE]: message`, source line, carets, notes, hint."""
    sources = sources or {}
    out: list[str] = []
    for diag in diagnostics:
        where = f"{diag.span}: " if diag.span else ""
        out.append(f"{where}{diag.severity.value}[{diag.code}]: {diag.message}")
        if diag.span:
            _render_snippet(sources, diag.span, out)
        for note in diag.notes:
            if note.span:
                out.append(f"  = note: {note.message} ({note.span})")
                _render_snippet(sources, note.span, out)
            else:
                out.append(f"  = note: {note.message}")
        if diag.hint:
            out.append(f"  = hint: {diag.hint}")
        if diag.fix is not None:
            out.append(f"  = fix: {diag.fix.summary} (`dagc fix` makes this edit)")
        out.append("")
    return "\n".join(out)


def render_json(diagnostics: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2, sort_keys=True)
