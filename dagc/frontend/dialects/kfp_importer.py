"""`dsl.importer(artifact_uri=..., artifact_class=dsl.Dataset, ...)` as a task of its own.

The call becomes a call of a task whose target is `kfp.dsl:importer`, marked with the KFP dialect; at run time
`dagc.runtime.dialects.kfp` runs it as `import_artifact`, which makes the artifact object KFP's local importer
makes. The artifact class passes as its name in `kfp.dsl` (a class KFP does not define is an `Artifact`, as
KFP's local run reads one), so that no class object is a task's argument.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagc.frontend.modules import ModuleInfo, TaskDef

__all__ = ["IMPORTER", "PARAMETERS", "importer_task"]

IMPORTER = "kfp·importer"  # the task's name in the module's symbols (not a Python identifier: no clash)
PARAMETERS = ("artifact_uri", "artifact_class", "reimport", "metadata", "download_to_workspace")
_SIGNATURE = ("def importer(artifact_uri: str, artifact_class: str = 'Artifact', reimport: bool = False,\n"
              "             metadata: dict = None, download_to_workspace: bool = False) -> Artifact:\n"
              "    ...\n")


def importer_task(info: ModuleInfo) -> TaskDef:
    """The importer's task, registered in the module's symbols under IMPORTER (once per module)."""
    from dagc.frontend.modules import FunctionSig, TaskDef
    from dagc.ir.types import TaskOptions

    found = info.symbols.get(IMPORTER)
    if found is not None:
        return found  # type: ignore[return-value]
    node = ast.parse(_SIGNATURE).body[0]
    assert isinstance(node, ast.FunctionDef)
    task = TaskDef("importer", "kfp.dsl", "importer", FunctionSig.of(node), TaskOptions(), "Artifact", node,
                   info.source, dialect="kfp")
    info.symbols[IMPORTER] = task
    return task
