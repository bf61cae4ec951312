"""Reading pipelines written for other frameworks (Metaflow, Kubeflow Pipelines, Airflow, Prefect) into dagc's IR.

Each dialect is read statically, like dagc's own annotations: the framework need not be installed to compile.
A task a dialect recognises becomes an ordinary task node marked with `ir.core.DIALECT_ATTR`, so every pass and
backend treats it as dagc's own; the runtime half (`dagc.runtime.dialects`) calls the function as its framework
would. docs/dialects.md lists what each dialect supports.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagc.frontend.modules import ModuleInfo, Opaque, Project

__all__ = ["DecoratorForm", "DECORATORS", "CLASS_BASES", "CONTEXTS", "dotted_name", "decorator_form",
           "class_dialect", "scan_dialect_class", "pipeline_context", "with_dialect", "scan_dialect_with", "user_symbol"]


@dataclass(frozen=True)
class DecoratorForm:
    """What a framework's decorator makes of a function: a task or a pipeline, in which dialect."""

    dialect: str
    kind: str  # "task" | "pipeline"


# The framework decorators dagc reads, by the dotted name they are imported under. Each dialect's own module
# (dagc.frontend.dialects.<dialect>) reads the options and call forms that go with them.
DECORATORS: dict[str, DecoratorForm] = {}

# A framework whose flows are classes (Metaflow's FlowSpec): the base class's dotted name -> the dialect whose
# module (dagc.frontend.dialects.<dialect>) reads such a class with `scan_flow(project, info, node)`.
CLASS_BASES: dict[str, str] = {}

# A framework whose pipelines are module-level `with` blocks (Airflow's `with DAG(...) as dag:`): the context
# class's dotted name -> the dialect whose module reads such a block with `scan_with(project, info, node)`.
CONTEXTS: dict[str, str] = {}

# The dialects whose framework runs every task of a pipeline, used or not: their tasks carry `ir.core.KEEP_ATTR`.
RUNS_EVERY_TASK: set[str] = set()


def dotted_name(info: ModuleInfo, expr: ast.expr) -> str | None:
    """The absolute dotted name `expr` (a name or attribute chain) stands for through the module's imports:
    `dsl.component` after `from kfp import dsl` is `kfp.dsl.component`; None for a local or unknown name."""
    from dagc.frontend.modules import ImportedModule, ImportedName
    from dagc.frontend.values import module_qualified

    root = expr
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or not isinstance(info.symbols.get(root.id), (ImportedModule, ImportedName)):
        return None  # (module_qualified reads an unbound name as a builtin's)
    return module_qualified(expr, info)


def decorator_form(info: ModuleInfo, expr: ast.expr) -> tuple[DecoratorForm, ast.Call | None] | None:
    """The framework form of decorator `expr` (`@dsl.component`, `@task(retries=3)`), or None."""
    call = expr if isinstance(expr, ast.Call) else None
    name = dotted_name(info, call.func if call is not None else expr)
    form = DECORATORS.get(name) if name is not None else None
    return (form, call) if form is not None else None


def class_dialect(info: ModuleInfo, node: ast.ClassDef) -> str | None:
    """The dialect of class `node` when it derives from a framework's flow class (`class F(FlowSpec)`)."""
    return next((CLASS_BASES[n] for b in node.bases if (n := dotted_name(info, b)) in CLASS_BASES), None)


def scan_dialect_class(project: Project, info: ModuleInfo, node: ast.ClassDef) -> Opaque | None:
    """A framework's flow class read by its dialect (its steps as tasks, the flow as a pipeline); None for any
    other class."""
    import importlib

    dialect = class_dialect(info, node) or next(
        (d for b in node.bases if (d := _user_class_dialect(project, info, b)) is not None), None)
    if dialect is None:
        return None
    return importlib.import_module(f"dagc.frontend.dialects.{dialect}").scan_flow(project, info, node)


def pipeline_context(info: ModuleInfo, node: ast.With) -> tuple[str, ast.withitem] | None:
    """The dialect and the item of `with` block `node` whose context is a framework's pipeline (`with DAG(...)`)."""
    for item in node.items:
        expr = item.context_expr
        name = dotted_name(info, expr.func if isinstance(expr, ast.Call) else expr)
        if name in CONTEXTS:
            return CONTEXTS[name], item
    return None


def with_dialect(info: ModuleInfo, node: ast.With) -> str | None:
    """The dialect of module-level `with` block `node` when its context is a framework's pipeline (`with DAG(...)`)."""
    found = pipeline_context(info, node)
    return found[0] if found is not None else None


def scan_dialect_with(project: Project, info: ModuleInfo, node: ast.With) -> bool:
    """A framework's pipeline written as a module-level `with` block, read by its dialect (its body's task calls
    as a pipeline); False for any other `with`."""
    import importlib

    dialect = with_dialect(info, node)
    if dialect is None:
        return False
    importlib.import_module(f"dagc.frontend.dialects.{dialect}").scan_with(project, info, node)
    return True


def _user_class_dialect(project: Project, info: ModuleInfo, base: ast.expr) -> str | None:
    """The dialect of a user class `base` names (`class Child(BaseFlow)`): its members say it."""
    from dagc.frontend.modules import Opaque

    symbol = user_symbol(project, info, base)
    return getattr(symbol.steps, "dialect", None) if isinstance(symbol, Opaque) else None


def user_symbol(project: Project, info: ModuleInfo, expr: ast.expr) -> object:
    """What `Name` or `module.Name` stands for in the user's code (through their imports), or None."""
    from dagc.frontend.modules import ImportedModule

    if isinstance(expr, ast.Name):
        return project.lookup(info, expr.id)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        owner = project.lookup(info, expr.value.id)
        module = project.module(owner.module) if isinstance(owner, ImportedModule) else None
        return project.lookup(module, expr.attr) if module is not None else None
    return None


# Each dialect's module registers its decorators in DECORATORS (its flow classes in CLASS_BASES, its pipeline
# contexts in CONTEXTS) when imported: one line per dialect.
from dagc.frontend.dialects import airflow as _airflow  # noqa: E402, F401
from dagc.frontend.dialects import kfp as _kfp  # noqa: E402, F401
from dagc.frontend.dialects import metaflow as _metaflow  # noqa: E402, F401
from dagc.frontend.dialects import prefect as _prefect  # noqa: E402, F401
