"""Generate dagc's library effect catalogue from torch's own metadata (run at development time).

The frontend never imports torch; it reads `dagc/frontend/torch_effects.json`, which this script writes:

  python scripts/gen_effect_catalog.py            # rewrite the catalogue for the installed torch
  python scripts/gen_effect_catalog.py --check    # exit 1 if the file differs from what torch says

Where each fact comes from:
  * operators (`torch.X(...)`, `tensor.X(...)`): the registered ATen schemas. An argument whose alias
    annotation is a write (`Tensor(a!) self`) is changed in place; an operator tagged
    `nondeterministic_seeded` draws from the global generator unless it is given `generator=`.
  * Python-level functions (`torch.nn.init.*`, `torch.nn.functional.*`): each is called once on small
    tensors under a dispatch mode that records the operators it reaches and which inputs they write.
  * layers (`torch.nn.Linear`, `torch.nn.MSELoss`, ...): each class is built with the first argument list
    that works and its forward run on a small input, recording the same facts for its constructor
    (random initial weights) and its forward (dropout), and whether it holds parameters or buffers
    (a layer with neither cannot change when called).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import warnings
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "dagc" / "frontend" / "torch_effects.json"


def _op_facts() -> tuple[dict[str, dict[str, Any]], set[str]]:
    """ATen operator name -> {"writes": [argument names it writes], "rng": bool}; and the names of the
    operators tagged nondeterministic_seeded."""
    import torch

    facts: dict[str, dict[str, Any]] = {}
    for schema in torch._C._jit_get_all_schemas():
        namespace, _, name = schema.name.partition("::")
        if namespace != "aten":
            continue
        entry = facts.setdefault(name, {"writes": set(), "positions": set(), "rng": False})
        positional = 0
        for arg in schema.arguments:
            if arg.alias_info is not None and arg.alias_info.is_write:
                entry["writes"].add(arg.name)
                if not arg.kwarg_only and arg.name != "out":
                    entry["positions"].add(positional)
            if not arg.kwarg_only:
                positional += 1
    seeded: set[str] = set()
    for name in facts:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        try:
            overloads = packet.overloads()
        except Exception:  # noqa: BLE001 - a packet torch cannot list: no tags to read
            continue
        for overload in overloads:
            op = getattr(packet, overload, None)
            if op is not None and torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()):
                facts[name]["rng"] = True
                seeded.add(name)
                break
    return facts, seeded


class _Recorder:
    """A dispatch mode recording, while active, whether any operator drew random numbers and which of
    the watched tensors an operator wrote."""

    def __init__(self, watched: list[Any]) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self
        self.rng = False
        self.written: set[int] = set()
        self.ops: set[str] = set()
        ids = {id(t): i for i, t in enumerate(watched)}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                import torch

                kwargs = kwargs or {}
                recorder.ops.add(func._schema.name)
                if torch.Tag.nondeterministic_seeded in func.tags and kwargs.get("generator") is None:
                    recorder.rng = True
                schema_args = func._schema.arguments
                values = list(args) + [kwargs.get(a.name) for a in schema_args[len(args):]]
                for arg, value in zip(schema_args, values):
                    if arg.alias_info is not None and arg.alias_info.is_write:
                        for item in value if isinstance(value, (list, tuple)) else (value,):  # `Tensor(a!)[]`
                            if id(item) in ids:
                                recorder.written.add(ids[id(item)])
                return func(*args, **kwargs)

        self.mode = Mode()


def _record(call: Any, watched: list[Any]) -> _Recorder | None:
    recorder = _Recorder(watched)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with recorder.mode:
                call()
    except Exception:  # noqa: BLE001 - an argument list that does not fit: try the next one
        return None
    return recorder


def _init_functions() -> dict[str, dict[str, Any]]:
    import torch

    out: dict[str, dict[str, Any]] = {}
    for name, fn in sorted(vars(torch.nn.init).items()):
        if name.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != "torch.nn.init":
            continue
        # required parameters after the tensor (`constant_(tensor, val)`, `sparse_(tensor, sparsity)`)
        extra = [0.5 for p in list(inspect.signature(fn).parameters.values())[1:]
                 if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
        for shape in ((4, 6), (4, 6, 3, 3), (6, 6), (6,)):
            tensor = torch.empty(shape)
            found = _record(lambda fn=fn, tensor=tensor, extra=extra: fn(tensor, *extra), [tensor])
            if found is not None:
                out[f"torch.nn.init.{name}"] = {"mutates": sorted(found.written), "rng": found.rng}
                break
    return out


def _functional() -> dict[str, dict[str, Any]]:
    """torch.nn.functional functions that draw random numbers or write an input with their defaults."""
    import torch
    import torch.nn.functional as F

    out: dict[str, dict[str, Any]] = {}
    for name, fn in sorted(vars(F).items()):
        if name.startswith("_") or not callable(fn) or getattr(fn, "__module__", "") != "torch.nn.functional":
            continue
        for args in ((torch.randn(2, 4, 6, 6),), (torch.randn(2, 4, 6),), (torch.randn(4, 6),)):
            found = _record(lambda fn=fn, args=args: fn(*args), list(args))
            if found is not None:
                if found.rng or found.written:
                    out[f"torch.nn.functional.{name}"] = {"mutates": sorted(found.written), "rng": found.rng}
                break
    return out


def _utils() -> dict[str, dict[str, Any]]:
    """torch.nn.utils functions (`clip_grad_norm_(model.parameters(), 1.0)`): which argument they change,
    counting a parameter's `.grad` as part of it."""
    import torch
    import torch.nn.utils as utils

    out: dict[str, dict[str, Any]] = {}
    for name, fn in sorted(vars(utils).items()):
        if name.startswith("_") or not inspect.isfunction(fn):
            continue
        for make in (lambda p: ([p], 1.0), lambda p: (torch.zeros(6), [p]), lambda p: ([p],)):
            param = torch.nn.Parameter(torch.ones(2, 3))
            param.grad = torch.full((2, 3), 2.0)
            args = make(param)
            found = _record(lambda fn=fn, args=args: fn(*args), [param, param.grad])
            if found is not None:
                if found.written or found.rng:
                    position = next(i for i, a in enumerate(args) if isinstance(a, list))
                    out[f"torch.nn.utils.{name}"] = {"mutates": [position] if found.written else [],
                                                     "rng": found.rng}
                break
    return out


_CONSTRUCTOR_ARGS: tuple[tuple[Any, ...], ...] = ((), (4,), (4, 4), (4, 4, 3), (4, 2, 4), (4, 4, 4, 4))
_FORWARD_INPUTS = ((2, 4, 6, 6), (2, 4, 6), (2, 4), (2, 6, 4, 6, 6))


def _layers() -> dict[str, dict[str, Any]]:
    import torch

    out: dict[str, dict[str, Any]] = {}
    for name, cls in sorted(vars(torch.nn).items()):
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)) or name.startswith("_"):
            continue
        if cls.__module__.startswith("torch.nn.modules.container") or name == "Module":
            continue
        built: list[Any] = []
        for args in _CONSTRUCTOR_ARGS:
            found = _record(lambda cls=cls, args=args, built=built: built.append(cls(*args)), [])
            if found is not None:
                layer = built[-1]
                holds_state = any(True for _ in layer.parameters()) or any(True for _ in layer.buffers())
                entry: dict[str, Any] = {"init_rng": found.rng, "stateless": not holds_state}
                layer.train()
                for shape in _FORWARD_INPUTS:
                    x = torch.randn(shape)
                    forward = _record(lambda layer=layer, x=x: layer(x), [])
                    if forward is not None:
                        entry["forward_rng"] = forward.rng
                        break
                out[f"torch.nn.{name}"] = entry
                break
    return out


_NUMBERS = frozenset({"int", "float", "bool", "str", "complex"})


def _number_like(annotation: Any) -> bool:
    """A parameter torch annotates as a number or a string, or a tuple of them (`lr: float | Tensor`
    included: the object holds the value it is given, which a task does not change through the object)."""
    import types
    import typing

    if isinstance(annotation, str):
        return annotation in _NUMBERS
    if annotation in (int, float, bool, str, complex):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_number_like(a) for a in args if a is not type(None))
    if origin is tuple:
        return bool(args) and all(_number_like(a) for a in args if a is not Ellipsis)
    return False


def _held_arguments(cls: Any) -> list[list[Any]] | None:
    """The constructor parameters whose objects a new instance may keep and later change ([position,
    name] pairs; position -1 for keyword-only): every parameter not annotated as a number or string.
    None when the signature cannot be read."""
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    try:  # annotations written as strings (`from __future__ import annotations`), resolved
        params = list(inspect.signature(cls.__init__, eval_str=True).parameters.values())[1:]
    except Exception:  # noqa: BLE001 - a name torch cannot resolve: keep the strings
        pass
    held: list[list[Any]] = []
    for index, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return None
        if p.annotation is inspect.Parameter.empty or not _number_like(p.annotation):
            held.append([index if p.kind is not p.KEYWORD_ONLY else -1, p.name])
    return held


def _classes() -> dict[str, dict[str, Any]]:
    """Optimizers, schedulers and data classes: which constructor arguments the object holds."""
    import torch
    import torch.optim.lr_scheduler as sched
    import torch.utils.data as data

    out: dict[str, dict[str, Any]] = {}
    for prefix, module, base in (("torch.optim", torch.optim, torch.optim.Optimizer),
                                 ("torch.optim.lr_scheduler", sched, sched.LRScheduler),
                                 ("torch.utils.data", data, object), ("torch.nn", torch.nn, torch.nn.Module)):
        for name, cls in sorted(vars(module).items()):
            if name.startswith("_") or not inspect.isclass(cls) or not issubclass(cls, base):
                continue
            held = _held_arguments(cls)
            if held is not None:
                out[f"{prefix}.{name}"] = {"holds": held}
    return out


def build() -> dict[str, Any]:
    import torch

    facts, _ = _op_facts()
    functions: dict[str, dict[str, Any]] = {}
    methods: dict[str, dict[str, Any]] = {}
    for name, entry in sorted(facts.items()):
        if not (entry["writes"] or entry["rng"]):
            continue
        record = {"mutates": sorted(entry["positions"]), "out": "out" in entry["writes"], "rng": entry["rng"]}
        # only where the Python name *is* the operator (a builtin), not a Python function of the same
        # name (`torch.manual_seed` is not `aten::manual_seed(Generator(a!) self, int seed)`)
        if inspect.isbuiltin(getattr(torch, name, None)):
            functions[f"torch.{name}"] = record
        method = getattr(torch.Tensor, name, None)
        if method is not None and (inspect.ismethoddescriptor(method) or inspect.isbuiltin(method)):
            methods[name] = {"self": "self" in entry["writes"], "rng": entry["rng"]}
    torch.manual_seed(0)
    functions.update(_init_functions())
    functions.update(_functional())
    functions.update(_utils())
    return {
        "generated_by": "scripts/gen_effect_catalog.py",
        "torch": torch.__version__.split("+")[0],
        "functions": functions,
        "tensor_methods": methods,
        "layers": _layers(),
        "classes": _classes(),
    }


def render(catalogue: dict[str, Any]) -> str:
    return json.dumps(catalogue, indent=1, sort_keys=True) + "\n"


def write_or_check(out: Path, build: Any, description: str, script: str, argv: list[str] | None = None) -> int:
    """The command line of a catalogue generator: write `render(build())` to `out`, or with `--check` exit 1
    when the file differs (scripts/gen_library_catalog.py uses it too)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        if out.read_text(encoding="utf-8") != text:
            print(f"{out} is out of date: run python scripts/{script}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_or_check(OUT, build, __doc__.splitlines()[0], "gen_effect_catalog.py", argv)


if __name__ == "__main__":
    sys.exit(main())
