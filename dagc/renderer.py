"""DOT text → picture bytes: the one place dagc runs a Graphviz program.

Graphviz's own `dot` is used when it is on PATH; otherwise `graphviz-pure`, a self-contained Graphviz
build installed by pip with dagc (a base dependency), draws SVG and PNG with its bundled fonts, so a
machine with Python and pip alone gets pictures, and they are byte-identical from run to run. PDF
needs the system `dot`; without it the error says so and names the formats that work.

Both programs take `dot`'s flags (`-K`, `-T`, `-n`, `-q`), so one command line serves both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RenderError", "Renderer", "find_renderer", "render_dot", "PIP_FORMATS"]

PIP_FORMATS = ("svg", "png")
_PIP_PROGRAM = "graphviz-pure"
# graphviz-pure lays text out with its bundled fonts and says so for every Helvetica label: noise for users.
_FONT_NOTES = ("no hard-coded metrics for", "no value for width of")
_INSTALL_HINT = ("install Graphviz (Debian/Ubuntu: apt-get install graphviz, macOS: brew install graphviz) "
                 "or reinstall dagc with pip, which brings graphviz-pure")


class RenderError(RuntimeError):
    """A picture could not be drawn (no Graphviz program, a format it lacks, or Graphviz failed)."""


@dataclass(frozen=True)
class Renderer:
    """A `dot`-compatible program and the output formats it draws."""

    name: str  # "dot" (system Graphviz) or "graphviz-pure" (installed by pip)
    program: str
    formats: tuple[str, ...] | None  # None: whatever Graphviz itself supports

    def draws(self, fmt: str) -> bool:
        return self.formats is None or fmt in self.formats


def _pip_program() -> str | None:
    """graphviz-pure's executable: on PATH, else in this interpreter's scripts directory (a venv used
    without activating it), else in the user scheme's."""
    found = shutil.which(_PIP_PROGRAM)
    if found:
        return found
    exe = _PIP_PROGRAM + (".exe" if os.name == "nt" else "")
    schemes = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    try:
        schemes.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for folder in schemes:
        candidate = Path(folder) / exe
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_renderer() -> Renderer | None:
    """The system `dot` when installed, else the pip-installed graphviz-pure, else None."""
    system = shutil.which("dot")
    if system:
        return Renderer("dot", system, None)
    pip = _pip_program()
    if pip:
        return Renderer(_PIP_PROGRAM, pip, PIP_FORMATS)
    return None


def render_dot(source: str, fmt: str, engine: str = "dot", neato_no_op: int | None = None,
               quiet: bool = False) -> bytes:
    """The picture of DOT `source` in format `fmt` (svg, png, pdf), laid out by `engine`.

    `neato_no_op=2` keeps the positions pinned in the source (`neato -n2`); `quiet` drops Graphviz's
    warnings. Raises RenderError when no program can draw `fmt`."""
    renderer = find_renderer()
    if renderer is None:
        raise RenderError(f"no Graphviz program found to draw {fmt.upper()}: {_INSTALL_HINT}; "
                          "or write a .dot file")
    if not renderer.draws(fmt):
        raise RenderError(f"{fmt.upper()} needs Graphviz's `dot` program, which is not installed; "
                          f"without it dagc draws {' and '.join(f.upper() for f in PIP_FORMATS)} "
                          f"(write .{' or .'.join(PIP_FORMATS)}), or install Graphviz "
                          "(Debian/Ubuntu: apt-get install graphviz, macOS: brew install graphviz)")
    if fmt == "png":
        # a sharper picture than Graphviz's default 72 dpi
        source = source.replace("{", "{\n\tgraph [dpi=110]", 1)
    command = [renderer.program, f"-K{engine}", f"-T{fmt}"]
    if neato_no_op is not None:
        command.append(f"-n{neato_no_op}")
    try:
        proc = subprocess.run(command, input=source.encode("utf-8"), capture_output=True, check=False)
    except OSError as exc:
        raise RenderError(f"cannot run {renderer.program}: {exc}") from None
    warnings = proc.stderr.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        raise RenderError(f"`{renderer.name}` failed: {warnings.strip() or f'exit status {proc.returncode}'}")
    if not quiet:
        shown = [line for line in warnings.splitlines()
                 if line.strip() and not (renderer.name == _PIP_PROGRAM and any(n in line for n in _FONT_NOTES))]
        if shown:
            sys.stderr.write("\n".join(shown) + "\n")
    return proc.stdout
