"""One Python emitter for every backend: unique identifiers, collected imports, readable output.

Backends describe *what* to run; this module owns *how it is written*: identifiers derived from IR
value names (`train[3]` → `train_3`), never clashing with Python keywords, builtins or the names an
emitted program uses itself; operands rendered as Python literals; and the shared program header.
"""

from __future__ import annotations

import builtins
import keyword
import os
import re
from collections.abc import Iterable
from pathlib import Path

from dagc.ir.core import DIALECT_ATTR, MODULE_VALUE_ATTR, Graph, Node
from dagc.ir.types import Const, Map, Operand, Ref, Seq

__all__ = ["Names", "CodeWriter", "render_operand", "source_root_expr", "module_search_paths", "call_source",
           "prose", "import_line", "task_function"]

_RESERVED = set(keyword.kwlist) | set(dir(builtins)) | {
    "annotations", "argparse", "importlib", "json", "os", "pickle", "sys", "time", "Path",
    "main", "run", "load_modules", "modules", "args", "parser", "result", "runtime",
    "PIPELINE", "SOURCE_ROOT", "MODULES", "SEARCH_PATHS",
}


class Names:
    """Maps IR names to unique Python identifiers, deterministically (first come, first served)."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._taken: set[str] = set(_RESERVED) | set(reserved)
        self._map: dict[str, str] = {}

    def __getitem__(self, ir_name: str) -> str:
        found = self._map.get(ir_name)
        if found is None:
            found = self._map[ir_name] = self._fresh(ir_name)
        return found

    def claim(self, key: str, base: str) -> str:
        """Identifier for `key` (not an IR value name), derived from `base`."""
        found = self._map.get(key)
        if found is None:
            found = self._map[key] = self._fresh(base)
        return found

    def _fresh(self, ir_name: str) -> str:
        base = re.sub(r"\W+", "_", ir_name.replace("#", "_")).strip("_") or "value"
        if base[0].isdigit():
            base = f"v_{base}"
        candidate, i = base, 1
        while candidate in self._taken or keyword.iskeyword(candidate):
            i += 1
            candidate = f"{base}_{i}"
        self._taken.add(candidate)
        return candidate


def prose(value: object) -> str:
    """`value` as text for a docstring or a comment of emitted code, whatever it holds (a user's directory
    may be named `\"\"\"` or hold a line break): backslashes, double quotes and control characters escaped."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def import_line(module: str, alias: str) -> str:
    """A statement that binds `alias` to the user's `module`: `import m` / `import m as a`, or through
    importlib for a module whose name is not a dotted identifier (a script named `my-pipe.py`) and for a
    submodule bound to another name: `import pkg.mod as a` binds `pkg`'s attribute `mod`, which is not the
    submodule when the package's `__init__.py` re-exports a function by that name (`from .mod import mod`)."""
    if all(part.isidentifier() and not keyword.iskeyword(part) for part in module.split(".")) and (
            alias == module or "." not in module):
        return f"import {module}" if alias == module else f"import {module} as {alias}"
    return f"{alias} = importlib.import_module({module!r})"


class CodeWriter:
    """Accumulates lines with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._indent = 0

    def line(self, text: str = "") -> None:
        # one line is one line: a line break taken from a user's path or name would end a comment early and
        # make the rest of it code
        if "\n" in text or "\r" in text:
            text = text.replace("\r", "\\r").replace("\n", "\\n")
        self.lines.append(("    " * self._indent + text) if text else "")

    def block(self, text: str) -> None:
        for line in text.splitlines():
            self.line(line)

    def indent(self) -> CodeWriter:
        self._indent += 1
        return self

    def dedent(self) -> None:
        self._indent -= 1

    def __enter__(self) -> CodeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dedent()

    def text(self) -> str:
        out = "\n".join(self.lines).rstrip() + "\n"
        return re.sub(r"\n{4,}", "\n\n\n", out)


def render_operand(operand: Operand, names: Names) -> str:
    if isinstance(operand, Ref):
        return names[operand.name]
    if isinstance(operand, Const):
        value = operand.value
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(operand, Seq):
        items = [render_operand(item, names) for item in operand.items]
        if operand.kind == "tuple":
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        return f"[{', '.join(items)}]"
    if isinstance(operand, Map):
        return "{" + ", ".join(f"{render_operand(k, names)}: {render_operand(v, names)}" for k, v in operand.items) + "}"
    raise TypeError(operand)


def task_function(node: Node, alias: str) -> str:
    """The callable a task node runs: its function, or, for a module-level object it reads, a function
    returning that object (read in the process that runs it, which imported the module)."""
    if node.attrs.get(MODULE_VALUE_ATTR):
        return f"(lambda: {alias}.{node.function})"
    dialect = node.attrs.get(DIALECT_ATTR)
    if dialect:  # a function written for another framework, called as that framework would
        outer, local, inner = node.function.partition(".<locals>.")
        if local:  # defined inside another function (a task in an Airflow DAG function): found through it
            return f"adapt({dialect!r}, {alias}.{outer}, {inner!r})"
        owner = node.attrs.get("task.class")
        if owner:  # a method of a derived class (it may be its base's function): the class, and the method's name
            return f"adapt({dialect!r}, {alias}.{owner}, {node.function.rpartition('.')[2]!r})"
        return f"adapt({dialect!r}, {alias}.{node.function})"
    return f"{alias}.{node.function}"


def dialect_imports(nodes: Iterable[Node]) -> tuple[str, ...]:
    """The import line `task_function` needs when some task (in any body) is written for another framework."""
    from dagc.ir.regions import walk

    return ("from dagc.runtime.dialects import adapt",) if any(
        inner.attrs.get(DIALECT_ATTR) for n in nodes for inner in (n, *walk(n))) else ()


def call_source(node: Node, function: str, names: Names) -> str:
    """`function(arg, ..., key=value)` for a task node."""
    parts = [render_operand(a, names) for a in node.args]
    parts += [f"{key}={render_operand(value, names)}" for key, value in node.kwargs]
    return f"{function}({', '.join(parts)})"


def module_search_paths(graph: Graph) -> list[str]:
    """Directories (relative to the source root, posix) to put on sys.path to import the modules."""
    paths: dict[str, None] = {}
    for module, file in sorted(graph.modules.items()):
        parts = Path(file).parts
        depth = len(module.split("."))
        if parts and parts[-1] == "__init__.py":
            depth += 1
        base = parts[: max(len(parts) - depth, 0)]
        paths.setdefault(Path(*base).as_posix() if base else ".", None)
    return list(paths) or ["."]


def source_root_expr(graph: Graph, out_path: Path | None) -> str:
    """Python expression for the user's source root, relative to the emitted file when known,
    so that the program and the sources can move together."""
    root = Path(graph.root).resolve()
    if out_path is None:
        return f"Path({root.as_posix()!r})"
    rel = os.path.relpath(root, out_path.resolve().parent)
    rel_posix = Path(rel).as_posix()
    if rel_posix == ".":
        return "Path(__file__).resolve().parent"
    return f"(Path(__file__).resolve().parent / {rel_posix!r}).resolve()"
