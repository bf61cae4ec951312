"""Module-level reads of torchrun's variables (`RANK`, `WORLD_SIZE`, ...), for `dagc check --backend torch`.

The torch program hides those variables from user code (dagc.runtime.distributed.take_launcher_environment),
so a module that configures itself from them at import — nanoGPT's `ddp = int(os.environ.get("RANK", -1)) != -1`
— takes its single-process path, as in the plain run. The check says so at the line: the code written
for torchrun does not do what it was written for under dagc, which places the work itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from dagc.diagnostics import Diagnostic, DiagnosticSink
from dagc.ir.location import SourceSpan
from dagc.runtime.program import LAUNCHER_VARIABLES

__all__ = ["launcher_reads"]


def launcher_reads(root: Path, modules: dict[str, str]) -> list[Diagnostic]:
    """DAGC162 at each module-level read of a launcher variable in the pipeline's modules."""
    sink = DiagnosticSink()
    for _module, relative in sorted(modules.items()):
        path = root / relative
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            continue  # the compiler reported it already
        for node, name in _reads(tree.body):
            sink.warning(
                "DAGC162", f"`{name}` is read when the module is imported; under the torch backend it is unset, as in "
                "`python script.py`", SourceSpan(relative, node.lineno, node.col_offset + 1, node.end_lineno or node.lineno,
                                           (node.end_col_offset or node.col_offset) + 1),
                hint="dagc starts the ranks and places the tasks itself, so code that configures distributed "
                f"training from `{name}` (init_process_group, a seed offset, a master process) takes its "
                "single-process path; inside a task, dagc.context() gives its rank and world size")
    return sink.diagnostics


def _reads(body: list[ast.stmt]) -> Iterator[tuple[ast.expr, str]]:
    """`os.environ["X"]`, `os.environ.get("X")`, `os.getenv("X")` in module-level statements."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(stmt):
            name = _variable(node)
            if name in LAUNCHER_VARIABLES:
                yield node, name  # type: ignore[misc]


def _variable(node: ast.AST) -> str | None:
    key: ast.expr | None = None
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        key = node.slice
    elif isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
        if (node.func.attr == "get" and _is_environ(node.func.value)) or (
                node.func.attr == "getenv" and isinstance(node.func.value, ast.Name) and node.func.value.id == "os"):
            key = node.args[0]
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value
    return None


def _is_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os")
