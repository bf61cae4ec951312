"""Built-in passes. Every module in this package that defines a registered pass is imported here,
so adding a pass is adding a module."""

from __future__ import annotations

import importlib
import pkgutil

from dagc.passes.base import Pass, PassContext, PassManager, parse_pipeline, register, registry

__all__ = ["Pass", "PassContext", "PassManager", "parse_pipeline", "register", "registry"]

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base" and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")
