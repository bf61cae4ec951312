"""The runnable parts of the project's Markdown pages, and how their shown output is matched.

A page marks what the docs test runs with an HTML comment on the line before a fenced block (readers do not
see it):

- `<!-- doctest -->` before a ```text block: `$ command` lines, each followed by the output it prints
  (standard output and standard error together). `...` in a line matches any text within that line; a line
  that is only `...` matches any number of lines.
- `<!-- doctest: numbers -->`: the same, but every number shown matches any number (figures that depend on the
  machine's CPU and library builds), and commands shown with the same output must print the same output.
- `<!-- doctest: file NAME -->` before a code block: the block is the file NAME, written before the page's
  commands that follow it run.
- `<!-- doctest: run -->` before a ```bash block: every command in it must succeed; its output is not shown.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "Command", "bash_commands", "blocks", "commands", "match_output", "pages"]

_MARKED = re.compile(r"^<!-- doctest(?::\s*(?P<arg>[^>]*?))?\s*-->\n(?:<[^>\n]*>\n)*```[\w-]*\n(?P<body>.*?)^```",
                     re.M | re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass(frozen=True)
class Command:
    argv: list[str]
    shown: list[str]  # the output the page shows, line by line


@dataclass(frozen=True)
class Block:
    kind: str  # "output", "numbers", "file", "run"
    body: str
    line: int  # where the block starts in its page (1-based), for messages
    name: str = ""  # the file a "file" block is


def blocks(text: str) -> list[Block]:
    """The marked blocks of a page, in page order."""
    found = []
    for m in _MARKED.finditer(text):
        arg = (m.group("arg") or "").split()
        kind = arg[0] if arg else "output"
        line = text.count("\n", 0, m.start()) + 1
        if kind not in ("output", "numbers", "file", "run"):
            raise ValueError(f"line {line}: unknown doctest marker {' '.join(arg)!r}")
        if kind == "file" and len(arg) != 2:
            raise ValueError(f"line {line}: `doctest: file` takes one file name")
        found.append(Block(kind, m.group("body"), line, arg[1] if kind == "file" else ""))
    return found


def commands(block: Block) -> list[Command]:
    """The `$ command` lines of an output block, each with the lines shown after it."""
    found: list[Command] = []
    for raw in block.body.splitlines():
        if raw.startswith("$ "):
            found.append(Command(shlex.split(raw[2:], comments=True), []))
        elif found:
            found[-1].shown.append(raw.rstrip())
        elif raw.strip():
            raise ValueError(f"line {block.line}: output before the first `$ command`: {raw!r}")
    for command in found:
        while command.shown and not command.shown[-1]:
            command.shown.pop()
    return found


def bash_commands(block: Block) -> list[list[str]]:
    """The commands of a ```bash block: lines joined at a trailing backslash, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block.body)
    return [shlex.split(line, comments=True) for line in joined.splitlines() if shlex.split(line, comments=True)]


def _line_pattern(line: str, numbers: bool) -> str:
    parts = []
    for k, piece in enumerate(line.split("...")):
        if k:
            parts.append(r"[^\n]*?")
        if numbers:
            pieces = _NUMBER.split(piece)
            parts.append(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?".join(re.escape(p) for p in pieces))
        else:
            parts.append(re.escape(piece))
    return "".join(parts)


def match_output(shown: list[str], printed: str, numbers: bool = False) -> bool:
    """Whether `printed` is what the `shown` lines describe (trailing spaces and blank lines ignored)."""
    actual = [line.rstrip() for line in printed.splitlines()]
    while actual and not actual[-1]:
        actual.pop()
    pattern = "".join(r"(?:[^\n]*\n)*?" if line == "..." else _line_pattern(line, numbers) + r"\n" for line in shown)
    return re.fullmatch(pattern, "".join(line + "\n" for line in actual)) is not None


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]
