"""Module-level symbols of user files, and resolution of the user's own imports.

A `ModuleInfo` records, from the top level of one file (never executed): which names are dagc's
decorators, which functions are tasks or pipelines (with their signatures and options), which
names are compile-time constants, and which names come from other modules. `Project` finds the
user's own modules on disk (relative to the entry script and its package root) and loads them
lazily; anything it cannot find is treated as an external library.
"""

from __future__ import annotations

import ast
import os
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagc.diagnostics import DiagnosticSink
from dagc.frontend.configs import STDLIB_MODULES, config_class, stdlib_value
from dagc.frontend.source import SourceFile, read_source
from dagc.frontend.static import NotStatic, eval_static, is_literal_value
from dagc.ir.types import TaskOptions

__all__ = [
    "Param",
    "FunctionSig",
    "TaskDef",
    "PipelineDef",
    "ImportedName",
    "ImportedModule",
    "Constant",
    "Opaque",
    "ClassSteps",
    "ModuleInfo",
    "Project",
]


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "positional_only" | "positional" | "keyword_only" | "var_positional" | "var_keyword"
    default: ast.expr | None
    annotation: str | None
    node: ast.arg


@dataclass(frozen=True)
class FunctionSig:
    params: tuple[Param, ...]

    @classmethod
    def of(cls, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> FunctionSig:
        a = fn.args
        params: list[Param] = []
        positional = a.posonlyargs + a.args
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for i, arg in enumerate(positional):
            kind = "positional_only" if i < len(a.posonlyargs) else "positional"
            params.append(Param(arg.arg, kind, defaults[i], _annotation(arg.annotation), arg))
        if a.vararg:
            params.append(Param(a.vararg.arg, "var_positional", None, None, a.vararg))
        for arg, default in zip(a.kwonlyargs, a.kw_defaults):
            params.append(Param(arg.arg, "keyword_only", default, _annotation(arg.annotation), arg))
        if a.kwarg:
            params.append(Param(a.kwarg.arg, "var_keyword", None, None, a.kwarg))
        return cls(tuple(params))

    def names(self) -> list[str]:
        return [p.name for p in self.params if p.kind not in ("var_positional", "var_keyword")]

    def display(self) -> str:
        """The parameter list as written, with `/`, `*`, `*args` and `**kwargs`: `path, n=10, *, seed=0`."""
        parts: list[str] = []
        kinds = [p.kind for p in self.params]
        for i, p in enumerate(self.params):
            if p.kind == "keyword_only" and "var_positional" not in kinds and (i == 0 or kinds[i - 1] != "keyword_only"):
                parts.append("*")
            if p.kind == "var_positional":
                parts.append(f"*{p.name}")
            elif p.kind == "var_keyword":
                parts.append(f"**{p.name}")
            elif p.default is not None:
                default = ast.unparse(p.default)
                parts.append(f"{p.name}={default if len(default) <= 20 else '…'}")
            else:
                parts.append(p.name)
            if p.kind == "positional_only" and (i + 1 == len(kinds) or kinds[i + 1] != "positional_only"):
                parts.append("/")
        return ", ".join(parts)


def _annotation(node: ast.expr | None) -> str | None:
    return ast.unparse(node) if node is not None else None


@dataclass
class TaskDef:
    name: str
    module: str
    qualname: str
    sig: FunctionSig
    options: TaskOptions
    returns: str | None
    node: ast.FunctionDef | ast.AsyncFunctionDef
    source: SourceFile
    after: tuple[str, ...] = ()
    dialect: str | None = None  # the framework it is written for (dagc.frontend.dialects), None for dagc's own
    # a method of a class deriving from the user's own classes (a Metaflow flow's base): the module defining the
    # function when a base of another module does, and the bases (`module:Class`), whose code it reads
    home: str | None = None
    bases: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"{self.module}:{self.qualname}"


@dataclass
class PipelineDef:
    name: str
    module: str
    sig: FunctionSig
    node: ast.FunctionDef | ast.AsyncFunctionDef
    source: SourceFile
    # the module that defines it, held weakly: the module holds its pipelines, and a cycle would keep
    # every parsed tree alive until a full collection (a tenth of the compile time at 10k tasks)
    module_ref: weakref.ref[ModuleInfo]
    owner: str | None = None  # the class a pipeline method belongs to
    receiver: str | None = None  # `self`/`cls` of a pipeline method: stands for the class in its body
    priority: int = 0  # `@dagc.pipeline(priority=N)`: higher runs first on a shared cluster
    dialect: str | None = None  # the framework it is written for (dagc.frontend.dialects), None for dagc's own

    @property
    def info(self) -> ModuleInfo:
        info = self.module_ref()
        assert info is not None, "a pipeline outlived the project that parsed it"
        return info


@dataclass(frozen=True)
class ImportedName:
    """`from module import name [as alias]` (module is absolute after resolving dots)."""

    module: str
    name: str
    node: ast.AST


@dataclass(frozen=True)
class ImportedModule:
    """`import module [as alias]`; `module` is the full dotted name the alias stands for."""

    module: str
    node: ast.AST


@dataclass(frozen=True)
class Constant:
    value: Any
    node: ast.AST


@dataclass(frozen=True)
class Opaque:
    """A module-level name whose value the compiler cannot know (a plain function, a class, …).
    A class may hold tasks and pipelines as static or class methods (`steps`)."""

    kind: str  # "function" | "class" | "value"
    node: ast.AST
    steps: ClassSteps | None = field(default=None, compare=False, hash=False)
    why: str | None = field(default=None, compare=False, hash=False)  # why a value is not known, if dagc can say


@dataclass
class ClassSteps:
    """The dagc methods of a user class (Metaflow's FlowSpec style): `Flow.start`, `self.train`."""

    name: str
    module: str
    members: dict[str, Any] = field(default_factory=dict)  # method name -> TaskDef | PipelineDef
    methods: set[str] = field(default_factory=set)  # the class's other methods and attributes
    constants: dict[str, Any] = field(default_factory=dict)  # class attributes with literal values
    has_init: bool = False  # an __init__ may give instances attributes that hide the class's

    def static_attribute(self, name: str) -> Any:
        return self.constants[name]


Symbol = Any  # TaskDef | PipelineDef | ImportedName | ImportedModule | Constant | Opaque | "dagc"


@dataclass
class ModuleInfo:
    name: str
    source: SourceFile
    is_package: bool
    dagc_modules: set[str] = field(default_factory=set)  # names bound to the dagc module
    dagc_names: dict[str, str] = field(default_factory=dict)  # local name -> "task" | "pipeline"
    symbols: dict[str, Symbol] = field(default_factory=dict)
    tasks: dict[str, TaskDef] = field(default_factory=dict)
    pipelines: dict[str, PipelineDef] = field(default_factory=dict)

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def resolve_relative(info_package: str, level: int, module: str | None) -> str | None:
    if level == 0:
        return module
    parts = info_package.split(".") if info_package else []
    if level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) if base else None


class Project:
    """The user's code on disk: the entry script and the modules it imports from its own tree."""

    def __init__(self, entry: Path, sink: DiagnosticSink, display: str | None = None) -> None:
        self.sink = sink
        self.entry = entry
        display = display if display is not None else str(entry)
        self.entry_display = display
        parts = [entry.stem]
        directory = entry.resolve().parent
        display_dir = os.path.dirname(display)
        while (directory / "__init__.py").is_file() and directory.parent != directory:
            parts.insert(0, directory.name)
            directory = directory.parent
            display_dir = os.path.dirname(display_dir) if display_dir not in ("", ".") else ".."
        self.root = directory
        self.root_display = os.path.normpath(display_dir) if display_dir else "."
        self.entry_module = ".".join(parts)
        script_dir = entry.resolve().parent
        # Python puts the script's directory on sys.path; the package root makes relative imports work
        self.search_paths: list[Path] = [script_dir] if script_dir == self.root else [script_dir, self.root]
        self.modules: dict[str, ModuleInfo | None] = {}
        self.files: dict[str, str] = {}  # module name -> path relative to root (posix)
        self.sources: dict[str, str] = {}  # display path -> text, for rendering diagnostics
        self.configs: dict[int, Any] = {}  # id(class node) -> ConfigClass | None
        self.paths: dict[str, Path] = {}  # module name -> its file (for `__file__`)

    # ---- locating and loading ------------------------------------------------------------------
    def _display_for(self, path: Path) -> str:
        rel = os.path.relpath(path, self.root)
        return os.path.normpath(os.path.join(self.root_display, rel)) if self.root_display != "." else rel

    def find_module_file(self, module: str) -> tuple[Path, bool] | None:
        rel = Path(*module.split("."))
        for base in self.search_paths:
            pkg = base / rel / "__init__.py"
            if pkg.is_file():
                return pkg, True
            mod = (base / rel).with_suffix(".py")
            if mod.is_file():
                return mod, False
        return None

    def load_entry(self) -> ModuleInfo | None:
        if self.entry_module in self.modules:
            return self.modules[self.entry_module]
        info = self._load(self.entry_module, self.entry, False, self.entry_display)
        return info

    def module(self, name: str) -> ModuleInfo | None:
        """The user module `name`, parsed (not executed); None if it is not part of the project."""
        if name in self.modules:
            return self.modules[name]
        found = self.find_module_file(name)
        if found is None:
            self.modules[name] = None
            return None
        path, is_package = found
        return self._load(name, path, is_package, self._display_for(path))

    def is_user_module(self, name: str) -> bool:
        return self.find_module_file(name) is not None or name in self.modules and self.modules[name] is not None

    def _load(self, name: str, path: Path, is_package: bool, display: str) -> ModuleInfo | None:
        self.modules[name] = None  # guards against import cycles while loading
        source = read_source(path, display, self.sink)
        if source is None:
            return None
        self.sources[display] = source.text
        try:
            rel = path.resolve().relative_to(self.root)
        except ValueError:
            rel = Path(os.path.relpath(path.resolve(), self.root))
        self.files[name] = rel.as_posix()
        self.paths[name] = path.resolve()
        info = ModuleInfo(name, source, is_package)
        self.modules[name] = info
        from dagc.frontend.scan import scan_module

        scan_module(self, info)
        return info

    # ---- name lookup ---------------------------------------------------------------------------
    def lookup(self, info: ModuleInfo, name: str, _depth: int = 0) -> Symbol | None:
        """What `name` means at the top level of `info`, following the user's own imports."""
        symbol = info.symbols.get(name)
        if isinstance(symbol, ImportedName) and _depth < 50:
            target = self.module(symbol.module)
            if target is not None:
                found = self.lookup(target, symbol.name, _depth + 1)
                if found is not None:
                    return found
            sub = self.module(f"{symbol.module}.{symbol.name}")
            if sub is not None:
                return ImportedModule(sub.name, symbol.node)
        return symbol


def static_symbol(project: Project, info: ModuleInfo, name: ast.Name, symbol: Symbol | None) -> Any:
    """The compile-time value of a module-level name that is not a plain constant: a dataclass
    config class, a pure part of the standard library (`os.path`, `math.pi`), or `__file__`."""

    if isinstance(symbol, ImportedModule) and symbol.module in STDLIB_MODULES:
        return stdlib_value(symbol.module)
    if isinstance(symbol, ImportedName):
        value = stdlib_value(f"{symbol.module}.{symbol.name}")
        if value is not None:
            return value
    if isinstance(symbol, Opaque) and symbol.kind == "class" and isinstance(symbol.node, ast.ClassDef):
        key = id(symbol.node)
        if key not in project.configs:
            owner = project.module(symbol.steps.module) if symbol.steps is not None else info
            owner = owner or info
            project.configs[key] = None  # a default naming its own class must not recurse
            project.configs[key] = config_class(symbol.node, owner.name, lambda n: _import_of(project, owner, n),
                                                lambda e: static_value(e, owner, project))
        found = project.configs[key]
        if found is not None:
            return found
        if symbol.steps is not None and symbol.steps.constants:
            return symbol.steps  # `Flow.GENRES`: the class's constants
        raise NotStatic(name, f"class `{name.id}` is not a dataclass config dagc can build at compile time "
                        "(a @dataclass with literal defaults, no base class and no __post_init__)")
    if isinstance(symbol, Opaque) and symbol.why is not None:
        raise NotStatic(name, f"`{name.id}` {symbol.why}")
    if symbol is None and name.id == "__file__" and info.name in project.paths:
        return project.paths[info.name].as_posix()
    raise NotStatic(name, f"`{name.id}` is not a module-level constant")


def _import_of(project: Project, info: ModuleInfo, local: str) -> str | None:
    """What a local name imports: `dataclass` → `dataclasses.dataclass`, `dc` → `dataclasses`."""
    symbol = info.symbols.get(local)
    if isinstance(symbol, ImportedName):
        return f"{symbol.module}.{symbol.name}"
    if isinstance(symbol, ImportedModule):
        return symbol.module
    return None


def static_value(node: ast.expr, info: ModuleInfo, project: Project) -> Any:
    """Evaluate a module-level expression: literals, constants, configs, pure standard library calls."""

    def lookup(name_node: ast.Name) -> Any:
        symbol = project.lookup(info, name_node.id)
        if isinstance(symbol, Constant):
            return symbol.value
        from dagc.frontend.static import BUILTIN, STATIC_BUILTINS

        if symbol is None and name_node.id in STATIC_BUILTINS:
            return BUILTIN
        if symbol is None and name_node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name_node.id]
        return static_symbol(project, info, name_node, symbol)

    return eval_static(node, lookup)


def static_option_value(node: ast.expr, info: ModuleInfo, project: Project) -> Any:
    """Evaluate a decorator argument using the module's constants."""
    value = static_value(node, info, project)
    if not is_literal_value(value):
        raise NotStatic(node, "value is not a literal")
    return value
