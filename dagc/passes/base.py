"""Pass infrastructure: a pass is a small frozen dataclass whose fields are its options.

    @register
    @dataclass(frozen=True)
    class Partition(Pass):
        '''Pre: verified graph. Post: every node has `partition.device`.'''
        name: ClassVar[str] = "partition"
        algo: str = "dagc"
        seed: int = 0
        def apply(self, ctx: PassContext, graph: Graph) -> None: ...

A pipeline is written `verify,dce,cse,partition{algo=heft seed=1}`. Passes mutate the graph in
place; the verifier runs after each pass, and a failure names the pass and those that ran before it.
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO

from dagc.diagnostics import CompileError, Diagnostic, DiagnosticSink, Severity
from dagc.ir.core import Graph

__all__ = [
    "Pass",
    "PassContext",
    "PassManager",
    "PassFailure",
    "PassSpecError",
    "register",
    "registry",
    "parse_pipeline",
    "Remark",
]


@dataclass(frozen=True)
class Remark:
    """An explanation a pass gives of a decision (e.g. why it fused or refused to fuse)."""

    pass_name: str
    message: str
    node: str | None = None


@dataclass
class PassContext:
    """What passes may consult besides the graph: the cluster, the cost model, and a sink."""

    cluster: Any = None  # dagc.cluster.Cluster; None means one local device
    cost_model: Any = None  # dagc.cost.CostModel
    backend: str = "local"
    sink: DiagnosticSink = field(default_factory=DiagnosticSink)
    remarks: list[Remark] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def remark(self, pass_name: str, message: str, node: str | None = None) -> None:
        self.remarks.append(Remark(pass_name, message, node))


class Pass:
    """Base of all passes. Subclasses are frozen dataclasses; fields are options."""

    name: ClassVar[str] = ""
    # a pass that only removes nodes (rewriting the uses of those it removes): when it removed none, the graph
    # is the one it was given, and the pass manager does not verify it again
    only_removes: ClassVar[bool] = False

    def apply(self, ctx: PassContext, graph: Graph) -> None:
        raise NotImplementedError

    def spec(self) -> str:
        """This pass written back as pipeline text, options in field order (non-default only)."""
        changed = [
            f"{f.name}={getattr(self, f.name)}"
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if getattr(self, f.name) != f.default
        ]
        return f"{self.name}{{{' '.join(changed)}}}" if changed else self.name


_REGISTRY: dict[str, type[Pass]] = {}


def register(cls: type[Pass]) -> type[Pass]:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"pass name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type[Pass]]:
    """Name → pass class, for every known pass (importing the built-in passes on first use)."""
    import dagc.passes  # noqa: F401  (registers the built-in passes)

    return dict(sorted(_REGISTRY.items()))


class PassSpecError(ValueError):
    """A pass pipeline string could not be read; the message says where and what is accepted."""


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise PassSpecError(f"unbalanced '}}' in pass pipeline {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise PassSpecError(f"unbalanced '{{' in pass pipeline {text!r}")
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _convert(value: str, annotation: Any, pass_name: str, option: str) -> Any:
    """An option's text as its declared type: bool, int, float, str, a `Literal[...]` of those, or any of them
    `| None` (written `none`). Text the type cannot take is an error naming the option; a type the parser
    cannot read is an error too (the pass declares an option no one can set)."""
    if isinstance(annotation, str):
        annotation = {"int": int, "float": float, "str": str, "bool": bool}.get(annotation, annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        if value.lower() == "none":
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _convert(value, rest[0], pass_name, option)
    if origin is typing.Literal:
        for choice in args:
            if str(choice) == value or (isinstance(choice, bool) and value.lower() == str(choice).lower()):
                return choice
        raise PassSpecError(f"option {option}={value!r} of pass {pass_name!r} must be one of: "
                            f"{', '.join(str(a) for a in args)}")
    if annotation is bool:
        if value.lower() in ("true", "1", "yes", "on"):
            return True
        if value.lower() in ("false", "0", "no", "off"):
            return False
        raise PassSpecError(f"option {option}={value!r} of pass {pass_name!r} must be true or false")
    if annotation in (int, float, str):
        try:
            return annotation(value)
        except ValueError:
            raise PassSpecError(f"option {option}={value!r} of pass {pass_name!r} must be {annotation.__name__}") \
                from None
    raise PassSpecError(f"pass {pass_name!r} declares option {option!r} of type {annotation!r}, which cannot be set "
                        "from text (options are bool, int, float, str, a Literal of those, or one of them | None)")


def _did_you_mean(name: str, choices: typing.Iterable[str]) -> str:
    """` (did you mean 'dce'?)` when one choice is close to the misspelt `name`, else nothing."""
    import difflib

    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_pipeline(text: str) -> list[Pass]:
    """`"verify,dce,partition{algo=heft devices=8}"` → pass instances, in order."""
    known = registry()
    passes: list[Pass] = []
    for item in _split_top_level(text):
        name, brace, rest = item.partition("{")
        name = name.strip()
        if name not in known:
            raise PassSpecError(f"unknown pass {name!r}{_did_you_mean(name, known)}; known passes: "
                                f"{', '.join(known)}")
        cls = known[name]
        options: dict[str, Any] = {}
        if brace:
            if not rest.endswith("}"):
                raise PassSpecError(f"pass {name!r}: options must end with '}}' in {item!r}")
            field_types = typing.get_type_hints(cls)
            fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
            for assignment in rest[:-1].replace(",", " ").split():
                key, eq, value = assignment.partition("=")
                if not eq:
                    raise PassSpecError(f"pass {name!r}: option {assignment!r} must be written key=value")
                if key not in fields:
                    accepted = ", ".join(sorted(fields)) or "none"
                    raise PassSpecError(f"pass {name!r} has no option {key!r}{_did_you_mean(key, fields)}; "
                                        f"options: {accepted}")
                options[key] = _convert(value, field_types.get(key), name, key)
        passes.append(cls(**options))
    return passes


class PassFailure(Exception):
    """A pass broke (raised, or left the graph invalid). Names the pass and the ones before it."""

    def __init__(self, pass_name: str, ran_before: list[str], diagnostics: list[Diagnostic], cause: str) -> None:
        self.pass_name = pass_name
        self.ran_before = ran_before
        self.diagnostics = diagnostics
        before = ", ".join(ran_before) if ran_before else "none"
        super().__init__(f"pass {pass_name!r} failed ({cause}); passes run before it: {before}")


@dataclass
class PassManager:
    """Runs passes in order, verifying after each; optional IR printing and timing."""

    passes: list[Pass]
    verify_each: bool = True
    print_after: tuple[str, ...] = ()
    print_after_all: bool = False
    time_passes: bool = False
    stream: TextIO | None = None
    printer: Callable[[Graph], str] | None = None
    timings: list[tuple[str, float]] = field(default_factory=list)

    def run(self, ctx: PassContext, graph: Graph) -> Graph:
        from dagc.ir.verifier import verify

        ran: list[str] = []
        for p in self.passes:
            start = time.perf_counter()
            count = len(graph)
            try:
                p.apply(ctx, graph)
            except CompileError:
                raise  # a user error found by a pass (e.g. a task that fits no device)
            except PassFailure:
                raise
            except Exception as exc:  # an internal error: say which pass and keep the traceback
                raise PassFailure(p.name, list(ran), [], f"{type(exc).__name__}: {exc}") from exc
            if ctx.sink.has_errors:
                raise CompileError(ctx.sink.sorted())
            elapsed = time.perf_counter() - start
            self.timings.append((p.spec(), elapsed))
            if self.verify_each and p.name != "verify" and not (p.only_removes and len(graph) == count):
                problems = [d for d in verify(graph) if d.severity is Severity.ERROR]
                if problems:
                    raise PassFailure(p.name, list(ran), problems, "the graph it produced is invalid")
            ran.append(p.name)
            if self.print_after_all or p.name in self.print_after:
                self._print(f"// ----- IR after {p.spec()} -----", graph)
        if self.time_passes and self.stream is not None:
            total = sum(t for _, t in self.timings) or 1e-12
            self.stream.write("// ----- pass timings -----\n")
            for name, seconds in self.timings:
                self.stream.write(f"//  {seconds * 1000:10.3f} ms  {100 * seconds / total:5.1f}%  {name}\n")
            self.stream.write(f"//  {total * 1000:10.3f} ms  100.0%  total\n")
        return graph

    def _print(self, header: str, graph: Graph) -> None:
        if self.stream is None:
            return
        if self.printer is None:
            from dagc.ir.printer import print_graph

            text = print_graph(graph)
        else:
            text = self.printer(graph)
        self.stream.write(f"{header}\n{text}")
        if not text.endswith("\n"):
            self.stream.write("\n")
