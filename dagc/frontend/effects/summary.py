"""What a task's body may do besides computing its result: `Effects` and the `Evidence` behind each effect."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from dagc.frontend.library import DATA_ANNOTATION_WORDS
from dagc.ir.effects import _SCALARS, is_immutable_type
from dagc.ir.location import SourceSpan


@dataclass(frozen=True)
class Evidence:
    """Where and why an effect was inferred (1-based lines, 0-based columns of the task's file): the whole
    expression, so that a diagnostic underlines all of it."""

    line: int
    col: int
    reason: str
    end_line: int = 0  # 0: unknown (the span is the one character at `col`)
    end_col: int = 0

    @classmethod
    def at(cls, node: ast.AST, reason: str) -> Evidence:
        line: int = getattr(node, "lineno", 1)
        col: int = getattr(node, "col_offset", 0)
        return cls(line, col, reason, getattr(node, "end_lineno", None) or 0, getattr(node, "end_col_offset", None) or 0)

    def span(self, file: str) -> SourceSpan:
        if self.end_line < self.line or self.end_line == self.line and self.end_col <= self.col:
            return SourceSpan(file, self.line, self.col + 1)
        return SourceSpan(file, self.line, self.col + 1, self.end_line, self.end_col + 1)


@dataclass
class Effects:
    """What one function may do. `mutates` maps parameter names to the first evidence found."""

    mutates: dict[str, Evidence] = field(default_factory=dict)
    definite: dict[str, Evidence] = field(default_factory=dict)  # certain changes (checked against declarations)
    world: Evidence | None = None
    rng: Evidence | None = None
    globals_written: dict[str, Evidence] = field(default_factory=dict)
    globals_read: set[str] = field(default_factory=set)
    seeds: bool = False  # seeds a global generator itself, so its draws do not depend on earlier tasks
    # some draw's value decides what it computes (False: its draws only advance the generator, as SVC's fit)
    rng_depends: bool = False
    # the file system: tasks that write files are ordered after earlier readers and writers, readers
    # after earlier writers (a checkpoint saved by one task and loaded by the next)
    file_read: Evidence | None = None
    file_write: Evidence | None = None
    # which files, where the path is known: "param:NAME" (the task's parameter) or "const:PATH"; any access
    # whose path is not known makes `file_paths_known` False (then every file access is ordered)
    file_paths: dict[str, set[str]] = field(default_factory=lambda: {"read": set(), "write": set()})
    file_paths_known: bool = True
    # prints, logs, progress bars, metric writers: kept by dce, but never state and never a reason not to cache
    output: Evidence | None = None
    # reads the clock, the process id or a fresh UUID: no effect, but run again it may return another value
    varies: Evidence | None = None
    # the user's functions and classes the body reaches (`module:function`, `module:Class`): the code whose
    # source the run-time fingerprint covers (editing any of them recomputes the task)
    reaches: set[str] = field(default_factory=set)
    # what it returns shares no object with its arguments (a new frame, a float, a fitted copy): its result
    # is not part of the state its arguments belong to
    fresh_result: bool = False
    # when every `return` is a tuple of the same length: per item, whether it shares no object with the arguments
    # (`return model, DataLoader(dataset)`: the new model does not, the loader holds the dataset)
    fresh_items: tuple[bool, ...] | None = None

    @property
    def is_pure(self) -> bool:
        return not (self.mutates or self.world or self.rng or self.globals_written)


SCALAR_TYPES = _SCALARS  # immutable types: a value of one cannot change in place, whoever holds it
# the IR's one predicate, under the frontend's older name: the frontend and the state analysis agree on
# `Literal`, `Optional`, unions, tuples and frozensets because they call the same function
is_scalar_type = is_immutable_type


def is_data_annotation(annotation: str | None) -> bool:
    """A parameter annotated as a tensor, an array or a container of them (not as a module)."""
    if annotation is None or "Module" in annotation:
        return False
    return any(word in annotation for word in DATA_ANNOTATION_WORDS)


def summary_key(effects: Effects) -> tuple:
    """What a fixpoint compares: which effects, not where they were found."""
    return (frozenset(effects.mutates), effects.world is not None, effects.rng is not None,
            frozenset(effects.globals_written), frozenset(effects.globals_read), effects.seeds,
            effects.file_read is not None, effects.file_write is not None, effects.output is not None,
            effects.file_paths_known, frozenset(effects.file_paths["read"]), frozenset(effects.file_paths["write"]),
            effects.varies is not None, effects.rng_depends)
