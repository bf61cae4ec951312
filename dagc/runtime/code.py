"""Code identity at run time: a task's fingerprint covers the source it runs, as it is on disk when the
program starts, so that editing a task or any function or class it reaches recomputes it (and everything
downstream) on `--resume` and `--cache`, with or without a new `dagc emit`.

The compiler records, per task, the code it reaches in the user's project (`module:function`,
`module:Class`, the task itself first), the tasks whose outputs or state versions its fingerprint
depends on, and the digest of that code when the program was emitted:

    CODE = {"train": (("flow:train", "flow:helper"), ("load",), "9f2c…")}
    CODE_FILES = {"flow": "flow.py"}

When the program starts, `refresh` hashes that code as it is now and gives every task a fingerprint that
chains the emitted one with the code's digest and the refreshed fingerprints of its upstream tasks; and
names the tasks whose code changed since the program was emitted.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from dagc.runtime.rows import TaskRow

__all__ = ["code_digest", "current_digests", "refresh", "definitions", "describe_changes", "CodeRow"]

CodeRow = tuple  # (code names, upstream tasks, digest when emitted)


@lru_cache(maxsize=256)
def definitions(path: str, mtime_ns: int, size: int) -> dict[str, str]:
    """`qualified name → hash of its source` (decorators included) for every function and class of a file:
    `train`, `Trainer`, `Trainer.fit`, `Outer.Inner.method`. The compiler's fingerprints use it too
    (dagc.backends.fingerprint), so both sides hash a function the same way."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    lines = text.splitlines(keepends=True)
    out: dict[str, str] = {}

    def segment(node: ast.stmt) -> str:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        return "".join(lines[first - 1 : node.end_lineno])

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[prefix + stmt.name] = hashlib.sha256(segment(stmt).encode("utf-8")).hexdigest()[:16]
                if isinstance(stmt, ast.ClassDef):
                    visit(stmt.body, f"{prefix}{stmt.name}.")
                else:  # a task defined inside a function (an Airflow DAG's): Python's `f.<locals>.g`
                    visit(stmt.body, f"{prefix}{stmt.name}.<locals>.")
            elif isinstance(stmt, ast.With) and not prefix:  # a module-level `with DAG(...):` defines module names
                visit(stmt.body, prefix)

    visit(tree.body, "")
    out.update(_value_definitions(tree.body, lines, out))
    return out


def _value_definitions(body: list[ast.stmt], lines: list[str], code: Mapping[str, str]) -> dict[str, str]:
    """`name → hash` for every module-level value (`LR = 0.1`, `CONFIG = {...}`, `TABLE = load(PATH)`): the
    source of each top-level statement that binds it (inside a top-level `if`/`try`/`with` too) and the hashes
    of the module's names those statements read (`LR = BASE * 2` changes with `BASE`), so that editing a
    constant a task reads recomputes the task."""
    statements: dict[str, list[ast.stmt]] = {}

    def collect(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
                continue
            if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
                for part in ("body", "orelse", "finalbody"):
                    collect(getattr(stmt, part, []))
                for handler in getattr(stmt, "handlers", []):
                    collect(handler.body)
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    statements.setdefault(node.id, []).append(stmt)
                elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    root = node.value
                    while isinstance(root, (ast.Attribute, ast.Subscript)):
                        root = root.value
                    if isinstance(root, ast.Name):  # `CONFIG["lr"] = 0.1`, `CONFIG.update(...)` below
                        statements.setdefault(root.id, []).append(stmt)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name):
                    statements.setdefault(node.func.value.id, []).append(stmt)  # `CONFIG.update(...)`
            if isinstance(stmt, ast.Expr):  # `tweak(CONFIG, 5)`: a call at module level may change what it is given
                for node in ast.walk(stmt.value):
                    if isinstance(node, ast.Name):
                        statements.setdefault(node.id, []).append(stmt)

    collect(body)
    out: dict[str, str] = {}
    active: set[str] = set()

    def digest(name: str) -> str:
        if name in out:
            return out[name]
        if name in active:  # `X = X + 1`, or two values defined from each other
            return "cycle"
        active.add(name)
        h = hashlib.sha256()
        for stmt in dict.fromkeys(statements[name]):
            h.update("".join(lines[stmt.lineno - 1 : stmt.end_lineno]).encode("utf-8"))
            for read in sorted({n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id != name}):
                if read in statements:
                    h.update(f"|{read}={digest(read)}".encode())
                elif read in code:  # a function or class of the module it calls
                    h.update(f"|{read}={code[read]}".encode())
        active.discard(name)
        out[name] = h.hexdigest()[:16] if name not in code else hashlib.sha256(
            f"{code[name]}|{h.hexdigest()}".encode()).hexdigest()[:16]
        return out[name]

    for name in statements:
        digest(name)
    return out


def _definition(name: str, root: Path, files: Mapping[str, str]) -> str:
    module, _, qualname = name.partition(":")
    rel = files.get(module)
    if rel is None:
        return "?"
    path = (root / rel).resolve()
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    return definitions(str(path), stat.st_mtime_ns, stat.st_size).get(qualname, "missing")


def code_digest(names: tuple[str, ...], root: Path, files: Mapping[str, str]) -> str:
    """One digest of the current source of every named function or class."""
    h = hashlib.sha256()
    for name in names:
        h.update(f"{name}={_definition(name, root, files)}\n".encode())
    return h.hexdigest()[:16]


def current_digests(code: Mapping[str, CodeRow], root: Path, files: Mapping[str, str]) -> dict[str, str]:
    """Per task, the digest of its code as it is now (what the cost store keys its figures by)."""
    return {task: code_digest(tuple(names), root, files) for task, (names, _upstream, _emitted) in code.items()}


def refresh(rows: Mapping[str, TaskRow], code: Mapping[str, CodeRow], root: Path, files: Mapping[str, str]
            ) -> tuple[dict[str, TaskRow], dict[str, list[str]]]:
    """`rows` (dagc.runtime.rows) with each task's fingerprint chained with the current digest of its code and the
    refreshed fingerprints of its upstream tasks; and, per task whose own code changed since the program
    was emitted, the names that changed."""
    fresh: dict[str, str] = {}
    changed: dict[str, list[str]] = {}
    out = {task: TaskRow.of(row) for task, row in rows.items()}
    for task, (names, upstream, emitted) in code.items():
        row = out.get(task)
        if row is None:
            continue
        digest = code_digest(tuple(names), root, files)
        if digest != emitted:
            changed[task] = list(names)
        h = hashlib.sha256(f"{row.fingerprint}|{digest}".encode())
        for up in upstream:
            h.update(f"|{fresh.get(up) or (rows[up][0] if up in rows else up)}".encode())
        fresh[task] = h.hexdigest()[:32]
        out[task] = row._replace(fingerprint=fresh[task])
    return out, changed


def describe_changes(changed: Mapping[str, list[str]]) -> str:
    """One line for the console: which tasks run again because their code changed."""
    shown = ", ".join(f"`{t}`" for t in list(changed)[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6
                                                              else "")
    return (f"dagc: code changed since this program was emitted: {shown} (and the tasks after them) are "
            "recomputed rather than reused")
