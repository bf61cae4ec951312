"""Running a Kubeflow Pipelines v2 component (`@dsl.component`) as KFP's executor would.

The program passes the component's inputs; this module makes what KFP's executor makes around the call:
an `Output[Model]` parameter gets an artifact whose `.path` is a fresh file under the run directory (or a
temporary directory when the run keeps none), an `OutputPath(str)` parameter a path whose text becomes the
output's value, an `InputPath` parameter the path of the artifact it receives. Parameter values pass as KFP
passes them, through protobuf's JSON values: numbers inside lists and dicts are floats, a tuple is a list,
and a parameter typed `int` is an int.

A call returns what `dagc.frontend.dialects.kfp.component_outputs` says: the return value itself when it is
the component's one output, else a dict of the outputs by name (NamedTuple fields, `Output`, the output
parameters). Artifacts are passed on as the artifact objects, with their metadata.

`dsl.importer(...)` is a task of its own (`import_artifact`): it makes the artifact object KFP's local importer
makes, whose `.uri` is the URI given and whose `.path` is what KFP maps that URI to.
"""

from __future__ import annotations

import inspect
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["adapt", "kfp_value", "import_artifact"]

SINGLE_OUTPUT = "Output"


def adapt(component: Any) -> Callable[..., Any]:
    """The plain callable for a KFP component (or its undecorated function)."""
    if _is_importer(component):
        return import_artifact
    func = getattr(component, "python_func", component)

    def run(*args: Any, **kwargs: Any) -> Any:
        return _call(func, args, kwargs)

    run.__name__ = getattr(func, "__name__", "component")
    run.__wrapped__ = func  # type: ignore[attr-defined]
    return run


def _is_importer(component: Any) -> bool:
    from kfp import dsl

    return component is dsl.importer


def import_artifact(artifact_uri: str, artifact_class: str = "Artifact", reimport: bool = False,
                    metadata: dict[str, Any] | None = None, download_to_workspace: bool = False) -> Any:
    """The artifact `dsl.importer(...)` gives: an instance of `kfp.dsl.<artifact_class>` (a class KFP does not
    define is read as `Artifact`, as KFP's local run reads one by its schema), named "artifact", with the URI
    and the metadata (its numbers floats, as protobuf carries them). A local file or directory it names is
    looked at here, so that a stored result of this task, and of the tasks that read the artifact, is
    reused only while that file is unchanged (dagc.runtime.filetrace)."""
    from kfp import dsl

    del reimport, download_to_workspace  # (KFP's remote store; a local run imports the file in place)
    cls = getattr(dsl, artifact_class, None)
    if not (isinstance(cls, type) and issubclass(cls, dsl.Artifact)):
        cls = dsl.Artifact
    artifact = cls(name="artifact", uri=str(artifact_uri), metadata=_protobuf(dict(metadata or {})))
    _look_at(str(artifact_uri))
    return artifact


def _look_at(uri: str) -> None:
    """Read a local file's first byte or list a directory, which the file trace records."""
    import os

    if "://" in uri:
        return  # a remote store (`gs://`), or `file://`, which KFP leaves as the path too
    if os.path.isfile(uri):
        with open(uri, "rb") as f:
            f.read(1)
    elif os.path.isdir(uri):
        os.listdir(uri)


def kfp_value(value: Any, annotation: Any = None) -> Any:
    """`value` as a KFP parameter of type `annotation` holds it after protobuf: a number inside a list or
    dict is a float, a tuple is a list; at the top, `int` stays an int and `float` is a float."""
    if annotation is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (list, tuple, dict)):
        return _protobuf(value)
    return value


def _protobuf(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_protobuf(v) for v in value]
    if isinstance(value, dict):
        return {k: _protobuf(v) for k, v in value.items()}
    return value


def _artifact_dir(func: Callable[..., Any]) -> Path:
    """A fresh directory for one call's output files: under the run directory when there is one."""
    from dagc.runtime.context import context

    ctx = context()
    base = ctx.run_dir / "kfp-artifacts" if ctx.run_dir is not None else Path(tempfile.gettempdir()) / "dagc-kfp"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{ctx.task or func.__name__}-".replace("/", "_"), dir=base))


def _call(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from kfp import dsl
    from kfp.dsl.types import type_annotations

    signature = inspect.signature(func)
    inputs = [p for p in signature.parameters.values() if not _is_output(p.annotation)]
    bound = dict(zip((p.name for p in inputs), args))
    bound.update(kwargs)
    call: dict[str, Any] = {}
    made: dict[str, Any] = {}  # output name -> the artifact or path the component writes
    where: Path | None = None
    for param in signature.parameters.values():
        annotation = type_annotations.maybe_strip_optional_from_annotation(param.annotation)
        if _is_output(annotation):
            where = where or _artifact_dir(func)
            path = where / param.name
            if isinstance(annotation, type_annotations.OutputPath):
                call[param.name] = made[param.name] = str(path)
            else:
                cls = type_annotations.get_io_artifact_class(annotation) or dsl.Artifact
                call[param.name] = made[param.name] = cls(name=param.name, uri=str(path), metadata={})
            continue
        if param.name not in bound:
            continue  # the component's own default
        value = bound[param.name]
        if isinstance(annotation, type_annotations.InputPath):
            call[param.name] = getattr(value, "path", value)
        elif type_annotations.is_Input_Output_artifact_annotation(annotation) or hasattr(value, "uri"):
            call[param.name] = value
        else:
            call[param.name] = kfp_value(value, annotation)
    returned = func(**call)
    return _result(signature, returned, made)


def _is_output(annotation: Any) -> bool:
    from kfp.dsl.types import type_annotations

    annotation = type_annotations.maybe_strip_optional_from_annotation(annotation)
    return isinstance(annotation, type_annotations.OutputPath) or (
        type_annotations.is_Input_Output_artifact_annotation(annotation)
        and type_annotations.is_artifact_wrapped_in_Output(annotation))


def _result(signature: inspect.Signature, returned: Any, made: dict[str, Any]) -> Any:
    """The call's result: the return value alone, or the dict of every output by name."""
    from kfp.dsl.types import type_annotations

    annotation = signature.return_annotation
    outputs: dict[str, Any] = {}
    fields = getattr(annotation, "_fields", None)
    if fields is not None and isinstance(annotation, type):
        hints = getattr(annotation, "__annotations__", {})
        outputs.update({f: kfp_value(getattr(returned, f), hints.get(f)) for f in fields})
    elif annotation not in (inspect.Signature.empty, None):
        outputs[SINGLE_OUTPUT] = kfp_value(returned, annotation)
    for name, made_value in made.items():
        declared = type_annotations.maybe_strip_optional_from_annotation(signature.parameters[name].annotation)
        if isinstance(declared, type_annotations.OutputPath) and _is_parameter(declared.type):
            outputs[name] = _read_output_parameter(Path(made_value), declared.type)
        elif isinstance(declared, type_annotations.OutputPath):
            from kfp import dsl

            cls = getattr(dsl, declared.type, dsl.Artifact) if isinstance(declared.type, str) else declared.type
            outputs[name] = cls(name=name, uri=made_value, metadata={})
        else:
            outputs[name] = made_value
    if list(outputs) == [SINGLE_OUTPUT]:
        return outputs[SINGLE_OUTPUT]
    return outputs or None


def _is_parameter(annotation: Any) -> bool:
    from kfp.dsl.types import type_utils

    return type_utils.is_parameter_type(annotation if isinstance(annotation, str) else
                                        getattr(annotation, "__name__", str(annotation)))


def _read_output_parameter(path: Path, annotation: Any) -> Any:
    """What KFP reads from an `OutputPath(type)` file: the text for `str`, JSON for the rest."""
    if not path.exists():
        return None
    text = path.read_text()
    if annotation is str or annotation == "String":
        return text
    if annotation is bool:
        return json.loads(text.lower())
    value = json.loads(text)
    return kfp_value(value, annotation)
