"""The run-time check of effects: what a task did, against what the compiler assumed it may do.

The compiler reads each task's body and decides what it may change (docs/ir.md, "Effects and state");
placement, ordering, caching and reuse all rest on that. Whatever the reading misses — a method looked up
by name, a C extension, a library helper — would be a silent wrong result on Ray and torch, where
tasks run in other processes. So the executor looks: before and after a task it takes

  * the version counters of the tensors reachable from each argument (a module's parameters, buffers
    and gradients, an optimizer's state, tensors in lists, dicts and the attributes of objects), and the
    identities of the items of the containers and objects it meets (an `append`, a rebound attribute);
  * the states of the global random generators (`random`, numpy's, torch's);
  * the files the task opened for writing (an audit hook);
  * the bindings of the user's modules' globals;

and stops the run at a task that did more than assumed, with an error naming the task, what changed, and
the annotation that says so. The assumptions come from the program's table (one row per task):

    (params, mutable, rng, files, globals)
    params   the parameter names of the positional arguments, in order
    mutable  the parameters the task may change in place
    rng      it may draw from (or seed) a global generator
    files    it may write files
    globals  the module-level names (`module.NAME`) it may rebind or change

Nothing here imports torch or numpy: they are looked at only when the program has imported them.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Assumed", "EffectViolation", "Watch", "watch"]

# a task's objects are walked up to this many items (a bound on the check's cost per task)
MAX_ITEMS = 50_000
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range, frozenset)
_IMMUTABLE_EXACT = frozenset(_IMMUTABLE)  # the common case, checked first by type


@dataclass(frozen=True)
class Assumed:
    params: tuple[str, ...] = ()
    mutable: frozenset[str] = frozenset()
    rng: bool = False
    files: bool = False
    globals: frozenset[str] = frozenset()
    own: frozenset[str] = frozenset()  # parameters given values built at the call: nobody else sees them
    # running it again on the same inputs gives the same output (backends/fingerprint.py,
    # computes_the_same_again): its output may be computed again rather than stored
    again: bool = False
    # no other task draws from a global generator unseeded: a draw not assumed is recorded, not an error
    alone: bool = False

    @classmethod
    def from_row(cls, row: tuple | None) -> Assumed | None:
        if row is None:
            return None
        params, mutable, rng, files, globals_ = row[:5]
        own = row[5] if len(row) > 5 else ()
        return cls(tuple(params), frozenset(mutable), bool(rng), bool(files), frozenset(globals_), frozenset(own),
                   len(row) > 6 and row[6] is True, len(row) > 7 and row[7] is True)


class EffectViolation(Exception):
    """A task did more than the compiler assumed: the run stops at it (never retried)."""

    def __init__(self, task: str, problems: list[str], hints: list[str], params: list[str] | None = None,
                 drawn: list[str] | None = None) -> None:
        self.task, self.problems, self.hints = task, problems, hints
        self.params, self.drawn = list(params or ()), list(drawn or ())  # what changed, for the run's record
        text = "; ".join(problems)
        fix = " ".join(dict.fromkeys(hints))
        super().__init__(f"task `{task}` did more than dagc assumed: {text}. dagc's reading of its code missed this, "
                         f"so other processes could see an old value. {fix} (`--no-check-effects` runs without "
                         "this check.)")


# ---- what is reachable from an argument -----------------------------------------------------------------
def _fingerprint(obj: Any) -> list[tuple[int, object]]:
    """(id, state) of everything mutable reachable from `obj`: tensors by version counter, containers and
    objects by the identities of what they hold."""
    torch = sys.modules.get("torch")
    tensor_type = torch.Tensor if torch is not None else None
    module_type = torch.nn.Module if torch is not None else None
    optimizer_type = torch.optim.Optimizer if torch is not None else None
    numpy = sys.modules.get("numpy")
    array_type = numpy.ndarray if numpy is not None else None
    pandas = sys.modules.get("pandas")
    frame_types = (pandas.DataFrame, pandas.Series, pandas.Index) if pandas is not None else None
    out: list[tuple[int, object]] = []
    seen: set[int] = set()
    stack = [obj]
    while stack and len(seen) < MAX_ITEMS:
        item = stack.pop()
        if type(item) in _IMMUTABLE_EXACT or isinstance(item, _IMMUTABLE) or id(item) in seen:
            continue
        seen.add(id(item))
        if array_type is not None and isinstance(item, array_type):
            out.append((id(item), _array_state(item)))  # by content: an array has no version counter
            continue
        if frame_types is not None and isinstance(item, frame_types):
            # by content, as pandas defines equality: its internal caches (filled by a read) are not a change
            out.append((id(item), _frame_state(pandas, item)))
            continue
        if tensor_type is not None and isinstance(item, tensor_type):
            grad = item.grad if item.requires_grad else None
            out.append((id(item), (item._version, id(grad), grad._version if grad is not None else None)))
            continue
        if module_type is not None and isinstance(item, module_type):
            out.append((id(item), (item.training,)))
            stack.extend(item.parameters())
            stack.extend(item.buffers())
            continue
        if optimizer_type is not None and isinstance(item, optimizer_type):
            out.append((id(item), tuple(id(s) for s in item.state.values())))
            for state in item.state.values():
                stack.extend(state.values())
            for group in item.param_groups:
                stack.extend(group["params"])
            continue
        if isinstance(item, (list, tuple)):
            out.append((id(item), tuple(map(id, item))))  # (map: at C speed, a task may get long lists)
            stack.extend(item)
        elif isinstance(item, dict):
            out.append((id(item), (tuple(map(id, item)), tuple(map(id, item.values())))))
            stack.extend(item.values())
        elif isinstance(item, (set, bytearray)):
            out.append((id(item), (len(item), hash(frozenset(map(id, item))) if isinstance(item, set) else
                                   bytes(item))))
        elif hasattr(item, "__dict__") and not isinstance(item, type) and type(item).__module__ not in (
                "builtins", "types"):
            attrs = vars(item)
            out.append((id(item), tuple((k, id(v)) for k, v in attrs.items())))
            stack.extend(attrs.values())
    return out


# arrays up to this size are compared by all their bytes; a larger one by SAMPLED_PAGES pages spread over it
# (a change that rewrites it, or part of it, is seen; one element changed among hundreds of MiB may not be:
# the compiler's reading sees direct writes, the check is its backstop)
HASHED_ARRAY_BYTES = 16 * 2**20
SAMPLED_PAGES = 512
# frames of up to this many rows are compared by pandas' hash of every row; a longer one by a sample of rows
HASHED_ROWS = 2**17


def _array_state(array: Any) -> object:
    """A numpy array's shape, dtype and a digest of its bytes (an object array: of its items' ids)."""
    if array.dtype.hasobject:
        return (array.shape, str(array.dtype), tuple(map(id, array.ravel().tolist())))
    try:
        import blake3

        data = array if array.flags.c_contiguous else array.copy(order="C")
        raw = memoryview(data).cast("B")
        if raw.nbytes > HASHED_ARRAY_BYTES:
            step = raw.nbytes // SAMPLED_PAGES
            h = blake3.blake3()
            for start in range(0, raw.nbytes, step):
                h.update(raw[start : start + 4096])
            h.update(raw[-4096:])
            return (array.shape, str(array.dtype), "sampled", h.digest())
        return (array.shape, str(array.dtype), blake3.blake3(raw).digest())
    except (ImportError, TypeError, ValueError):
        return (array.shape, str(array.dtype), array.tobytes())


def _frame_state(pandas: Any, frame: Any) -> object:
    """A DataFrame's, Series' or Index's labels, dtypes and a digest of its values (pandas' own row hashes)."""
    sample = frame if len(frame) <= HASHED_ROWS else frame[:: max(1, len(frame) // (HASHED_ROWS // 16))]
    try:
        rows = pandas.util.hash_pandas_object(sample, index=not isinstance(frame, pandas.Index)).to_numpy()
    except (TypeError, ValueError):  # unhashable cells (lists in an object column): their identities
        # (numbers and strings by value, NaN as one: `to_numpy()` of a mixed frame boxes them anew on every call)
        rows = tuple((v if v == v else "NaN") if isinstance(v, _IMMUTABLE) else id(v)
                     for v in frame.to_numpy().ravel().tolist())
        return (type(frame).__name__, getattr(frame, "shape", None), rows)
    labels = tuple(map(str, frame.columns)) if isinstance(frame, pandas.DataFrame) else (str(frame.name),) \
        if isinstance(frame, pandas.Series) else ()
    dtypes = tuple(map(str, frame.dtypes)) if isinstance(frame, pandas.DataFrame) else (str(frame.dtype),)
    return (type(frame).__name__, frame.shape, labels, dtypes, _array_state(rows))


def _generators() -> dict[str, object]:
    """The global random generators' states (of the libraries the program has imported)."""
    import random

    states: dict[str, object] = {"random": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state = numpy.random.get_state()
        states["numpy.random"] = (state[1].tobytes(), state[2])
    torch = sys.modules.get("torch")
    if torch is not None:
        states["torch"] = bytes(torch.random.get_rng_state().numpy())
    return states


# ---- files written: an audit hook, installed once per process ---------------------------------------------
_local = threading.local()
_hook_installed = False


def _audit(event: str, args: tuple) -> None:
    watching = getattr(_local, "files", None)
    if watching is None or event != "open" or len(args) < 2:
        return
    path, mode = args[0], args[1]
    flags = args[2] if len(args) > 2 else 0
    if isinstance(flags, int) and flags & os.O_EXCL and flags & os.O_CREAT:
        return  # a new file of a unique name (tempfile.mkstemp, a library's scratch file): nobody else reads it
    writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
        mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
    if writes and isinstance(path, (str, bytes)) and "__pycache__" not in str(path):
        watching.append(str(path))


def _install_hook() -> None:
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True


# ---- one task -------------------------------------------------------------------------------------------
@dataclass
class Watch:
    """What one task's run is compared against (taken before it runs)."""

    task: str
    assumed: Assumed
    arguments: list[tuple[str, Any]]
    before: list[list[tuple[int, object]]]
    generators: dict[str, object]
    modules: dict[str, dict[str, int]]
    files: list[str] = field(default_factory=list)
    unseen_params: list[str] = field(default_factory=list)
    unseen_rng: bool = False
    drawn: list[str] = field(default_factory=list)  # generators it drew from unassumed, with nobody else drawing

    def stop(self) -> None:
        """Stop recording the files the task opens (after it returned or failed)."""
        if getattr(_local, "files", None) is self.files:
            _local.files = None

    def finish(self) -> None:
        """Compare with now; raise EffectViolation where the task did more than assumed."""
        self.stop()
        problems: list[str] = []
        hints: list[str] = []
        changed_params = []
        # an object reachable from an argument the task may change may change (an optimizer steps the
        # model's parameters it holds, whichever argument also reaches them)
        allowed = {key for (param, _), before in zip(self.arguments, self.before) if param in self.assumed.mutable
                   for key, _ in before}
        for (param, value), before in zip(self.arguments, self.before):
            if param in self.assumed.mutable:
                continue
            after = dict(_fingerprint(value))
            if any(key not in allowed and after.get(key) != state for key, state in before):
                changed_params.append(param)
        if changed_params:
            names = ", ".join(f"`{p}`" for p in changed_params)
            problems.append(f"it changed {names} in place")
            hints.append(f"Declare it: `@dagc.task(mutates={changed_params!r})`.")
        drawn_now: list[str] = []
        if not self.assumed.rng:
            drawn = [name for name, state in _generators().items() if self.generators.get(name, state) != state]
            drawn_now = [] if self.assumed.alone else drawn
            if drawn and self.assumed.alone:  # no other task's result depends on it: recorded, not fatal
                self.drawn = drawn
            elif drawn:
                problems.append(f"it drew from the global random generator ({', '.join(drawn)})")
                hints.append("Draw from a generator made in the task (`torch.Generator().manual_seed(seed)`, "
                             "`random.Random(seed)`), or seed inside it; a model with dropout draws when called "
                             "in training mode: annotate its parameter with its class (`model: Net`) so that "
                             "dagc sees it.")
        if self.files and not self.assumed.files:
            shown = ", ".join(self.files[:3]) + (" …" if len(self.files) > 3 else "")
            problems.append(f"it wrote files dagc did not know of ({shown})")
            hints.append("Declare them: `@dagc.task(writes=[...])`, or order the readers with `after=[...]`.")
        rebound = []
        for module, names in self.modules.items():
            current = sys.modules.get(module)
            if current is None:
                continue
            now = vars(current)
            for name in set(names) | set(now):
                if names.get(name) != (id(now[name]) if name in now else None) and \
                        f"{module}.{name}" not in self.assumed.globals and not name.startswith("__"):
                    rebound.append(f"{module}.{name}")
        if rebound:
            problems.append(f"it rebound module-level {', '.join(f'`{r}`' for r in sorted(rebound)[:3])}")
            hints.append("Keep module-level values unchanged by tasks: return the new value instead.")
        if problems:
            raise EffectViolation(self.task, problems, hints, changed_params, drawn_now)
        # what was assumed but not seen this time (`dagc check --profile RUN_DIR` reports what never was)
        self.unseen_params = sorted(
            param for (param, value), before in zip(self.arguments, self.before)
            if param in self.assumed.mutable and param not in self.assumed.own
            and all(dict(_fingerprint(value)).get(key) == state for key, state in before))
        self.unseen_rng = False
        if self.assumed.rng and self.generators:
            self.unseen_rng = all(self.generators.get(n, s) == s for n, s in _generators().items())


def watch(task: str, assumed: Assumed, args: tuple, kwargs: Mapping[str, Any], modules: list[str]) -> Watch:
    """Start watching a task about to run with `args`/`kwargs` (call `.finish()` when it returned)."""
    arguments: list[tuple[str, Any]] = []
    for index, value in enumerate(args):
        param = assumed.params[index] if index < len(assumed.params) else (assumed.params[-1] if assumed.params
                                                                             else f"#{index}")
        arguments.append((param, value))
    arguments.extend(kwargs.items())
    before = [_fingerprint(value) for _, value in arguments]
    generators = _generators()
    snapshot = {m: {k: id(v) for k, v in vars(sys.modules[m]).items()} for m in modules if m in sys.modules}
    found = Watch(task, assumed, arguments, before, generators, snapshot)
    if not assumed.files:
        _install_hook()
        _local.files = found.files
    return found

