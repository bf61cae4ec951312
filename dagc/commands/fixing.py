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

from dagc.apply_fixes import apply_edits
from dagc.commands.common import EXIT_ERRORS, EXIT_OK, compile_input, print_diagnostics
from dagc.diagnostics import CompileError, Diagnostic
from dagc.fixes import Edit
from dagc.usage import UsageError

__all__ = ["MAX_ROUNDS", "cmd_fix"]

MAX_ROUNDS = 5  # compiles that may bring new fixes; a fix that keeps coming back stops there


@dataclass
class _Files:
    """The text of every file a fix edits, as it is now (edited or not), by the path diagnostics show."""

    original: dict[str, str] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)

    def text(self, display: str) -> str:
        if display not in self.current:
            raw = Path(display).read_bytes()
            text = raw[len(codecs.BOM_UTF8):].decode("utf-8") if raw.startswith(codecs.BOM_UTF8) \
                else raw.decode("utf-8")
            self.original[display] = self.current[display] = text
        return self.current[display]

    def changed(self) -> list[str]:
        return [d for d in self.current if self.current[d] != self.original[d]]

    def overrides(self) -> dict[Path, str]:
        return {Path(d).resolve(): text for d, text in self.current.items()}


@dataclass(frozen=True)
class _Made:
    code: str
    where: str
    summary: str


def _diagnostics(args: argparse.Namespace) -> list[Diagnostic]:
    """What `dagc check` reports for the input: every error and warning, of each of its pipelines."""
    from dagc.frontend import list_pipelines

    chosen = args.pipeline
    names = [chosen] if chosen is not None else list_pipelines(args.input) or [None]
    found: dict[Diagnostic, None] = {}
    for name in names:
        args.pipeline = name
        try:
            found.update(dict.fromkeys(compile_input(args, passes="verify,dce,cse").warnings))
        except CompileError as exc:
            found.update(dict.fromkeys(exc.diagnostics))
    args.pipeline = chosen
    return list(found)


def _round(diagnostics: list[Diagnostic], files: _Files, made: list[_Made]) -> bool:
    """Apply every fix of `diagnostics` (each file in one pass); whether any text changed."""
    edits: dict[str, dict[Edit, None]] = {}
    for diag in diagnostics:
        if diag.fix is not None:
            for edit in diag.fix.edits:
                edits.setdefault(edit.at.file, {})[edit] = None
    missed: set[Edit] = set()
    changed = False
    for display, wanted in sorted(edits.items()):
        before = files.text(display)
        applied = apply_edits(before, list(wanted))
        missed.update(applied.missed)
        if applied.text != before:
            files.current[display] = applied.text
            changed = True
    if changed:
        made.extend(dict.fromkeys(_Made(d.code, str(d.span) if d.span else "", d.fix.summary) for d in diagnostics
                                  if d.fix is not None and not missed.intersection(d.fix.edits)))
    return changed


def _diff(files: _Files) -> str:
    out: list[str] = []
    for display in files.changed():
        out.extend(difflib.unified_diff(files.original[display].splitlines(keepends=True),
                                        files.current[display].splitlines(keepends=True),
                                        fromfile=f"a/{display}", tofile=f"b/{display}"))
    return "".join(out)


def _write(files: _Files) -> None:
    for display in files.changed():
        path = Path(display)
        raw = files.current[display].encode("utf-8")
        path.write_bytes(codecs.BOM_UTF8 + raw if path.read_bytes().startswith(codecs.BOM_UTF8) else raw)


def cmd_fix(args: argparse.Namespace) -> int:
    from dagc.console import verbosity
    from dagc.frontend.source import SOURCE_TEXTS

    if not str(args.input).endswith(".py"):
        raise UsageError(f"{args.input}: `dagc fix` edits Python scripts; give the script (SCRIPT.py)")
    files = _Files()
    made: list[_Made] = []
    diagnostics: list[Diagnostic] = []
    for attempt in range(MAX_ROUNDS + 1):
        token = SOURCE_TEXTS.set(files.overrides())  # the edited texts, compiled without being written
        try:
            diagnostics = _diagnostics(args)
        finally:
            SOURCE_TEXTS.reset(token)
        if attempt == MAX_ROUNDS or not _round(diagnostics, files, made):
            break
    left = diagnostics  # what the last compile still reports: no fix, or one that could not be made
    if args.diff:
        sys.stdout.write(_diff(files))
    else:
        _write(files)
    quiet = verbosity() < 0
    if args.diag_format == "text" and not quiet:
        for item in made:
            sys.stderr.write(f"{item.where}: fixed[{item.code}]: {item.summary}\n")
    if left and (args.diag_format == "json" or not quiet):
        print_diagnostics(args, left, _sources(files, left))
    if args.diag_format == "text" and not quiet:
        verb = "would change" if args.diff else "changed"
        sys.stderr.write(f"{args.input}: {len(made)} fix(es) made; {verb} {', '.join(files.changed()) or 'nothing'}; "
                         f"{len(left)} diagnostic(s) left to fix by hand\n")
    if args.diff:
        return EXIT_OK
    return EXIT_ERRORS if any(d.is_error for d in left) else EXIT_OK


def _sources(files: _Files, diagnostics: list[Diagnostic]) -> dict[str, str]:
    """The text each diagnostic points into: the edited one where a fix changed the file."""
    from dagc.commands.common import read_sources

    return {**read_sources(diagnostics), **files.current}

