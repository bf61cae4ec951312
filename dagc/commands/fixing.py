"""`dagc fix`: make the edits that diagnostics propose (dagc.fixes), and say what is left to do by hand.

The script is compiled as `dagc check` compiles it; every fix its diagnostics carry is applied with libcst
(dagc.apply_fixes), which rewrites only the nodes the edits name. A fix can bring the next diagnostic to
light (once `import dagc` is there, the pipeline compiles, and its tasks are checked), so the edited text
is compiled again, without being written, until no fix is left or `MAX_ROUNDS` have run. Then the files
are written (or, with --diff, a unified diff is printed and nothing is written).
"""

from __future__ import annotations

import argparse
import codecs
import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagc.commands.common import EXIT_ERRORS, EXIT_OK, compile_input, print_diagnostics
from dagc.diagnostics import CompileError, Diagnostic
from dagc.fixes import Edit
from dagc.ir.location import SourceSpan
from dagc.usage import UsageError

if TYPE_CHECKING:
    from dagc.apply_fixes import Applied

__all__ = ["MAX_ROUNDS", "cmd_fix"]

MAX_ROUNDS = 5  # compiles that may bring new fixes; a fix that keeps coming back stops there


@dataclass
class _Files:
    """The text of every file a fix edits, as it is now (edited or not), by resolved path; `shown` keeps the
    path as diagnostics first showed it."""

    original: dict[Path, str] = field(default_factory=dict)
    current: dict[Path, str] = field(default_factory=dict)
    shown: dict[Path, str] = field(default_factory=dict)
    marked: set[Path] = field(default_factory=set)  # files that begin with a UTF-8 byte order mark, kept on write

    def key(self, display: str) -> Path:
        path = Path(display).resolve()
        if path not in self.current:
            raw = path.read_bytes()
            if raw.startswith(codecs.BOM_UTF8):
                self.marked.add(path)
            self.original[path] = self.current[path] = raw.decode("utf-8-sig")  # (as read_source decodes it)
            self.shown[path] = display
        return path

    def changed(self) -> list[Path]:
        return [p for p in self.current if self.current[p] != self.original[p]]


@dataclass(frozen=True)
class _Made:
    """A fix made: its diagnostic's code and place (in the text as it was then) and what it did."""

    code: str
    span: SourceSpan | None
    summary: str
    texts: tuple[tuple[Path, str], ...]  # every edited file's text when it was made

    def where(self, files: _Files) -> str:
        """`path:line:col` in the file as it was before `dagc fix` (lines that earlier fixes moved counted back)."""
        if self.span is None:
            return ""
        path = Path(self.span.file).resolve()
        then = dict(self.texts).get(path)
        if then is None or path not in files.original:
            return str(self.span)
        matcher = difflib.SequenceMatcher(a=files.original[path].splitlines(), b=then.splitlines(), autojunk=False)
        line = self.span.line
        for tag, i1, _i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal" and j1 < line <= j2:
                line = line - j1 + i1
                break
        return f"{self.span.file}:{line}:{self.span.col}"


def _diagnostics(args: argparse.Namespace) -> list[Diagnostic]:
    """What `dagc check` reports for the input: every error and warning, of each of its pipelines, with the
    effects that runs never showed (DAGC158: --profile RUN_DIR, else the script's own recent runs)."""
    from dagc.frontend import list_pipelines
    from dagc.frontend.observed import recent_runs
    from dagc.unseen import RUNS_FOR_HINT, unseen_effects

    chosen = args.pipeline
    names = [chosen] if chosen is not None else list_pipelines(args.input) or [None]
    found: dict[Diagnostic, None] = {}
    for name in names:
        args.pipeline = name
        try:
            compilation = compile_input(args, passes="verify,dce,cse")
        except CompileError as exc:
            found.update(dict.fromkeys(exc.diagnostics))
            continue
        found.update(dict.fromkeys(compilation.warnings))
        runs: Any = args.profile or recent_runs(Path(args.input), compilation.graph.name)
        if args.profile or len(runs) >= RUNS_FOR_HINT:
            found.update(dict.fromkeys(unseen_effects(compilation.graph, runs)))
    args.pipeline = chosen
    return list(found)


def _round(diagnostics: list[Diagnostic], files: _Files, made: list[_Made]) -> bool:
    """Apply every fix of `diagnostics` (each file in one pass); whether any text changed. A fix is made whole
    or not at all: when one of its edits finds no code, its other edits are left out too."""
    fixes = [d.fix for d in diagnostics if d.fix is not None]
    missed: set[Edit] = set()
    texts = tuple(files.current.items())  # (what the diagnostics' places refer to)
    while True:
        edits: dict[Path, dict[Edit, None]] = {}
        for fix in fixes:
            if not missed.intersection(fix.edits):
                for edit in fix.edits:
                    edits.setdefault(files.key(edit.at.file), {})[edit] = None
        results = {path: _apply(files.current[path], list(wanted)) for path, wanted in sorted(edits.items())}
        newly = {edit for applied in results.values() for edit in applied.missed} - missed
        if not newly:
            break
        missed |= newly
    changed = False
    for path, applied in results.items():
        if applied.text != files.current[path]:
            files.current[path] = applied.text
            changed = True
    if changed:
        made.extend(dict.fromkeys(_Made(d.code, d.span, d.fix.summary, texts) for d in diagnostics
                                  if d.fix is not None and not missed.intersection(d.fix.edits)))
    return changed


def _apply(text: str, edits: list[Edit]) -> Applied:
    from dagc.apply_fixes import apply_edits  # (libcst: loaded by this command only)

    return apply_edits(text, edits)


def _diff(files: _Files) -> str:
    out: list[str] = []
    for path in files.changed():
        shown = files.shown[path]
        out.extend(difflib.unified_diff(files.original[path].splitlines(keepends=True),
                                        files.current[path].splitlines(keepends=True),
                                        fromfile=f"a/{shown}", tofile=f"b/{shown}"))
    return "".join(out)


def _write(files: _Files) -> None:
    for path in files.changed():
        raw = files.current[path].encode("utf-8")
        path.write_bytes(codecs.BOM_UTF8 + raw if path in files.marked else raw)


def cmd_fix(args: argparse.Namespace) -> int:
    from dagc.console import verbosity
    from dagc.frontend.source import SOURCE_TEXTS

    if not str(args.input).endswith(".py"):
        raise UsageError(f"{args.input}: `dagc fix` edits Python scripts; give the script (SCRIPT.py)")
    files = _Files()
    made: list[_Made] = []
    diagnostics: list[Diagnostic] = []
    seen: set[frozenset[tuple[Path, str]]] = set()
    for attempt in range(MAX_ROUNDS + 1):
        token = SOURCE_TEXTS.set(dict(files.current))  # the edited texts, compiled without being written
        try:
            diagnostics = _diagnostics(args)
        finally:
            SOURCE_TEXTS.reset(token)
        state = frozenset(files.current.items())
        if attempt == MAX_ROUNDS or state in seen:  # (two fixes undoing each other: stop where they met)
            break
        seen.add(state)
        if not _round(diagnostics, files, made):
            break
    left = diagnostics  # what the last compile still reports: no fix, or one that could not be made
    if args.diff:
        sys.stdout.write(_diff(files))
        sys.stdout.flush()  # (before the report on stderr, where both go to one place)
    else:
        _write(files)
    quiet = verbosity() < 0
    if args.diag_format == "text" and not quiet:
        for item in made:
            sys.stderr.write(f"{item.where(files)}: fixed[{item.code}]: {item.summary}\n")
    if left and (args.diag_format == "json" or not quiet):
        print_diagnostics(args, left, _sources(files, left))
    if args.diag_format == "text" and not quiet:
        verb = "would change" if args.diff else "changed"
        changed = ", ".join(files.shown[p] for p in files.changed()) or "nothing"
        sys.stderr.write(f"{args.input}: {len(made)} fix(es) made; {verb} {changed}; "
                         f"{len(left)} diagnostic(s) left to fix by hand\n")
    if args.diff:
        return EXIT_OK
    return EXIT_ERRORS if any(d.is_error for d in left) else EXIT_OK


def _sources(files: _Files, diagnostics: list[Diagnostic]) -> dict[str, str]:
    """The text each diagnostic points into: the edited one where a fix changed the file."""
    from dagc.commands.common import read_sources

    sources = read_sources(diagnostics)
    for display in sources:
        edited = files.current.get(Path(display).resolve())
        if edited is not None:
            sources[display] = edited
    return sources
