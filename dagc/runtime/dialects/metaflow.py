"""Running a Metaflow step as a dagc task, as `python flow.py run` runs it.

A step runs on a fresh instance of its flow class, made without `FlowSpec.__init__` (which would parse the
command line and run the whole flow). The instance holds what Metaflow's datastore would give the step: copies of
the artifacts its predecessor left (a linear step), the flow's `Parameter`s, Configs (read by the start step's
task) and class-level values as read-only properties, the foreach stack behind `self.input`, `self.index` and
`self.foreach_stack()` (and `current.parallel` in a @parallel step), and for a join its `inputs` (with
`merge_artifacts`). The step's own `self.next(...)` is Metaflow's, recorded on the instance.

A task returns the `Artifacts` the step leaves (a foreach step also the indices of its items, a switch step the
value of its condition); the `end` step
returns its artifacts as a plain dict, name to value: the pipeline's result, what Metaflow's client shows as the
run's data.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import pickle
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType, MethodType
from typing import Any

__all__ = ["adapt", "adapt_local", "Artifacts", "run_step"]

# attributes of the instance that are Metaflow's (or this module's) bookkeeping, never artifacts passed down
_BOOKKEEPING = frozenset({
    "name", "_datastore", "_transition", "_cached_input", "_current_step", "_foreach_stack", "_fixed", "_success",
    "_task_ok", "_exception", "_foreach_var", "_foreach_num_splits", "_foreach_values", "_unbounded_foreach",
    "_parallel_ubf_iter", "_control_mapper_tasks", "_control_task_is_mapper_zero", "_catch_exception", "_graph_info",
    "merge_artifacts"})


@dataclass(frozen=True)
class Artifacts:
    """What a step leaves for the steps after it."""

    step: str
    values: dict[str, Any]  # the artifacts set on `self` (and inherited), by name
    fixed: dict[str, Any]  # the flow's parameters and class-level values: read-only in every step
    # per enclosing foreach, the fields of Metaflow's ForeachFrame as a plain tuple: Metaflow defines that class in
    # `__main__`, which is not the same module in the process that unpickles the artifacts (a Ray worker)
    stack: tuple[tuple[Any, ...], ...] = ()
    foreach: tuple[str, int, tuple[Any, ...] | None] | None = None  # (artifact, splits, shown values) of a foreach


def adapt(fn: Any) -> Callable[..., Any]:
    """The task that runs step `fn` (a `@step` method of a FlowSpec class, taken from the class)."""
    return functools.partial(run_step, _flow_class(fn), fn.__qualname__.rpartition(".")[2])


def adapt_local(cls: type, step: str) -> Callable[..., Any]:
    """The task that runs `step` of flow class `cls`, which derives from the user's own flow classes (the step
    may be a base's function: its flow object is still of class `cls`)."""
    return functools.partial(run_step, cls, step)


def _flow_class(fn: Any) -> type:
    owner: Any = sys.modules[fn.__module__]
    for part in fn.__qualname__.split(".")[:-1]:
        owner = getattr(owner, part)
    return owner  # type: ignore[no-any-return]


def run_step(cls: type, step: str, *args: Any, **parameters: Any) -> Any:
    """Run `step` of flow `cls`: `start(**parameters)`, `step(parent)`, `step(parent, index)` for the first step of
    a foreach item, `join(joined)` with the list of the joined steps' artifacts."""
    node = cls._graph[step]  # type: ignore[attr-defined]
    function = getattr(cls, step)
    if step == cls._graph.start_step:  # type: ignore[attr-defined]
        flow, inputs = _instance(cls, step, _fixed_values(cls, parameters), ()), None
    elif node.num_args > 1:
        flow, inputs = _join(cls, step, node, list(args[0]))
    else:
        parent: Artifacts = args[0]
        index = args[1] if len(args) > 1 else None
        stack = list(parent.stack)
        if index is not None:  # the first step of a foreach item pushes its frame, as Metaflow's task does
            assert parent.foreach is not None, f"step {step} follows no foreach"
            var, splits, shown = parent.foreach
            stack.append((step, var, splits, index, shown[index] if shown else None))
        flow, inputs = _instance(cls, step, parent.fixed, tuple(stack), parent.values), None
    flow = _run(cls, step, function, flow, inputs, node)
    return _result(cls, step, node, flow)


def _run(cls: type, step: str, function: Any, flow: Any, inputs: Any, node: Any) -> Any:
    """Call the step; under @catch, retry it in place and keep the last failure in the artifact @catch names."""
    decorators = {d.name: d for d in getattr(function, "decorators", ())}
    catch = decorators.get("catch")
    if catch is None:
        _call(function, flow, inputs)
        return flow
    retry = decorators.get("retry")
    attempts = 1 + (int(retry.attributes.get("times") or 0) if retry is not None else 0)
    var = catch.attributes.get("var")
    for attempt in range(attempts):
        trial = flow if attempt == attempts - 1 else _copy_instance(cls, step, flow)
        try:
            _call(function, trial, inputs, attempt)
        except Exception as exc:  # noqa: BLE001  (what @catch is for)
            if attempt < attempts - 1:
                continue
            from metaflow.exception import MetaflowExceptionWrapper

            if catch.attributes.get("print_exception", True) not in (False, "False", "false"):
                print(f"@catch caught an exception from <flow {cls.__name__} step {step}>", flush=True)
                traceback.print_exc(file=sys.stdout)
            wrapped = MetaflowExceptionWrapper(exc)
            trial.__dict__["_transition"] = (node.out_funcs, None)
            trial.__dict__["_catch_exception"] = wrapped
            if var:
                setattr(trial, var, wrapped)
            return trial
        if var:
            setattr(trial, var, None)
        return trial
    raise AssertionError("unreachable")


def _call(function: Any, flow: Any, inputs: Any, attempt: int | None = None) -> None:
    _set_current(flow, attempt)
    _set_parallel(flow, function)
    if inputs is None:
        function(flow)
    else:
        function(flow, inputs)


def _set_current(flow: Any, attempt: int | None) -> None:
    """Metaflow's `current` for the step: the flow's and step's names, the task (dagc's name for it) and its
    attempt (`attempt`, under @catch); there is no Metaflow run, so `current.run_id` is None."""
    from metaflow import current

    from dagc.runtime.context import context

    task = context()
    current._set_env(flow=flow, step_name=flow._current_step, task_id=task.task,
                     retry_count=task.attempt if attempt is None else attempt, is_running=True)


_THIS_TASK = threading.local()  # the @parallel task running in this thread: what `current.parallel` says


def _set_parallel(flow: Any, function: Any) -> None:
    """`current.parallel` and `current.is_parallel` for a @parallel step, as Metaflow's local run gives them: its
    task's index among the N of `num_parallel=N` (the index of its foreach frame), N, and the loopback address;
    read per thread, since the local backend may run the N tasks at once."""
    from metaflow import current
    from metaflow.metaflow_current import Parallel

    parallel = any(d.name == "parallel" for d in getattr(function, "decorators", ()))
    frame = flow.__dict__["_foreach_stack"][-1] if parallel and flow.__dict__["_foreach_stack"] else None
    _THIS_TASK.parallel = Parallel(main_ip="127.0.0.1", num_nodes=int(frame.num_splits), node_index=int(frame.index),
                                   control_task_id=None) if frame is not None else None
    if not isinstance(type(current).__dict__.get("parallel"), property) \
            or type(current).__dict__["parallel"].fget is not _current_parallel:
        type(current).parallel = property(_current_parallel)
        type(current).is_parallel = property(lambda _: getattr(_THIS_TASK, "parallel", None) is not None)


def _current_parallel(_current: Any) -> Any:
    from metaflow.metaflow_current import Parallel

    found = getattr(_THIS_TASK, "parallel", None)
    return found if found is not None else Parallel(main_ip="127.0.0.1", num_nodes=1, node_index=0,
                                                     control_task_id=None)


def _result(cls: type, step: str, node: Any, flow: Any) -> Any:
    transition = flow.__dict__.get("_transition")
    if node.type != "end" and transition is None:
        raise RuntimeError(f"step {step} of {cls.__name__} finished without calling self.next(...)")
    if transition is not None and not (set(transition[0]) <= set(node.out_funcs) if node.type == "split-switch"
                                       else list(transition[0]) == list(node.out_funcs)):
        raise RuntimeError(f"step {step} of {cls.__name__} went to {', '.join(transition[0])}, not to the steps "
                           f"its last statement names ({', '.join(node.out_funcs)})")
    values = _artifacts(flow)
    fixed = flow.__dict__["_fixed"]
    if node.type == "end":  # (Metaflow's client reads a Config's value as the plain dict it stored)
        from metaflow.user_configs.config_parameters import ConfigValue

        found = {**fixed, **values, "name": cls.__name__}
        return dict(sorted((k, v.to_dict() if isinstance(v, ConfigValue) else v) for k, v in found.items()))
    stack = tuple(tuple(frame) for frame in flow.__dict__["_foreach_stack"])
    if transition is not None and transition[1] is not None:  # a foreach: its items' indices go to the map
        splits = int(flow.__dict__["_foreach_num_splits"]) if not flow.__dict__.get("_unbounded_foreach") \
            else int(flow.__dict__["_parallel_ubf_iter"].num_parallel)  # (`num_parallel=`: N tasks of a step)
        shown = flow.__dict__.get("_foreach_values")
        foreach = (transition[1], splits, tuple(shown) if shown is not None else None)
        return Artifacts(step, values, fixed, stack, foreach), list(range(splits))
    if node.type == "split-switch":  # the case its condition chose goes to the pipeline's `if`
        return Artifacts(step, values, fixed, stack), getattr(flow, node.condition)
    return Artifacts(step, values, fixed, stack)


def _artifacts(flow: Any) -> dict[str, Any]:
    """The artifacts on `flow`, as Metaflow persists them: its attributes but methods, functions, Parameters and
    Metaflow's bookkeeping."""
    from metaflow import Parameter

    return {name: value for name, value in flow.__dict__.items()
            if name not in _BOOKKEEPING and not name.startswith("__")
            and not isinstance(value, (MethodType, FunctionType, Parameter))}


def _instance(cls: type, step: str, fixed: dict[str, Any], stack: tuple[Any, ...],
              values: dict[str, Any] | None = None) -> Any:
    """A flow object for `step`, holding copies of `values` (Metaflow's datastore hands each task its own)."""
    from metaflow.tuple_util import ForeachFrame

    _make_fixed_properties(cls, fixed)
    flow = cls.__new__(cls)  # (FlowSpec.__init__ parses the command line and runs the flow)
    flow.__dict__.update(name=cls.__name__, _datastore=None, _transition=None, _cached_input={}, _current_step=step,
                         _foreach_stack=[ForeachFrame(*frame) for frame in stack], _fixed=fixed, _success=False, _task_ok=None, _exception=None)
    if values:
        flow.__dict__.update(copy.deepcopy(values))
    return flow


def _copy_instance(cls: type, step: str, flow: Any) -> Any:
    """A fresh object for another attempt of the step, with what `flow` held before it ran."""
    fresh = _instance(cls, step, flow.__dict__["_fixed"], tuple(flow.__dict__["_foreach_stack"]), _artifacts(flow))
    if "merge_artifacts" in flow.__dict__:  # a join's
        fresh.__dict__["merge_artifacts"] = MethodType(merge_artifacts, fresh)
    return fresh


def _join(cls: type, step: str, node: Any, joined: list[Artifacts]) -> tuple[Any, Any]:
    """The join's own flow object and its `inputs`: one flow object per joined step."""
    from metaflow.datastore.inputs import Inputs

    inputs = Inputs(_instance(cls, a.step, a.fixed, a.stack, a.values) for a in joined)
    first = joined[0]
    foreach_join = bool(node.split_parents) and cls._graph[node.split_parents[-1]].type == "foreach"  # type: ignore[attr-defined]
    stack = first.stack[:-1] if foreach_join else first.stack  # a foreach join pops its frame
    flow = _instance(cls, step, first.fixed, stack)
    flow.__dict__["merge_artifacts"] = MethodType(merge_artifacts, flow)
    return flow, inputs


def merge_artifacts(self: Any, inputs: Any, exclude: list[str] | None = None, include: list[str] | None = None) -> None:
    """Metaflow's `merge_artifacts` over the joined flow objects: artifacts not set in this step, equal (as pickled)
    on every branch that has them."""
    from metaflow.exception import (
        MetaflowException,
        MissingInMergeArtifactsException,
        UnhandledInMergeArtifactsException,
    )
    from metaflow.flowspec import INTERNAL_ARTIFACTS_SET

    include, exclude = include or [], exclude or []
    if include and exclude:
        raise MetaflowException("`exclude` and `include` are mutually exclusive in merge_artifacts")
    step = self._current_step
    to_merge: dict[str, tuple[Any, str]] = {}
    unresolved: list[str] = []
    for inp in inputs:
        for var, value in _artifacts(inp).items():
            chosen = var in include if include else var not in exclude and var not in INTERNAL_ARTIFACTS_SET
            if not chosen or hasattr(self, var):
                continue
            digest = hashlib.sha1(pickle.dumps(value, protocol=4)).hexdigest()
            if to_merge.setdefault(var, (value, digest))[1] != digest and var not in unresolved:
                unresolved.append(var)
    missing = [v for v in include if v not in to_merge and not hasattr(self, v)]
    if unresolved:
        raise UnhandledInMergeArtifactsException(
            f"Step *{step}* cannot merge the following artifacts due to them having conflicting values:\n"
            f"[{', '.join(unresolved)}].\nTo remedy this issue, be sure to explicitly set those artifacts (using "
            "self.<artifact_name> = ...) prior to calling merge_artifacts.", unresolved)
    if missing:
        raise MissingInMergeArtifactsException(
            f"Step *{step}* specifies that [{', '.join(include)}] should be merged but [{', '.join(missing)}] are "
            "not present.\nTo remedy this issue, make sure that the values specified in only come from at least "
            "one branch", missing)
    for var, (value, _) in to_merge.items():
        setattr(self, var, value)


# ---- parameters and class-level values ---------------------------------------------------------------------------
_CLASS_VALUES: dict[type, dict[str, Any]] = {}  # per flow class, its class-level values before they became properties


def _fixed_values(cls: type, given: dict[str, Any]) -> dict[str, Any]:
    """The flow's parameters (given, or their defaults) and class-level values, as the start step sees them."""
    originals = _originals(cls)
    fixed: dict[str, Any] = {}
    for var, original in originals.items():
        from metaflow import Config, Parameter

        if isinstance(original, Config):
            fixed[var] = _config_value(original)
        elif isinstance(original, Parameter):
            fixed[var] = _parameter_value(original, given.get(var))
        else:
            fixed[var] = original
    return fixed


def _originals(cls: type) -> dict[str, Any]:
    found = _CLASS_VALUES.get(cls)
    if found is None:
        from metaflow import Parameter

        found = {}
        for var in dir(cls):
            if var[0] == "_" or var in cls._NON_PARAMETERS:  # type: ignore[attr-defined]
                continue
            value = getattr(cls, var)
            if isinstance(value, Parameter) or not isinstance(value, (MethodType, FunctionType, property, type)):
                found[var] = value
        _CLASS_VALUES[cls] = found
    return found


def _config_value(config: Any) -> Any:
    """A Config's value, as Metaflow's run loads it before the start step: its default file (read here, in the
    start step's task, so that a change to the file makes the run's tasks stale: dagc.runtime.filetrace) or its
    default_value, parsed by its parser or as JSON; a ConfigValue unless the Config is `plain`."""
    import json

    from metaflow.user_configs.config_options import ConfigInput
    from metaflow.user_configs.config_parameters import ConfigValue

    default = config.kwargs.get("default")
    if callable(default):
        default = default(None)
    if default is None:
        return None
    plain = bool(config.kwargs.get("plain"))
    if getattr(config, "_default_is_file", False):
        with open(default, encoding="utf-8") as handle:
            default = handle.read()
    if isinstance(default, str):
        default = ConfigInput._call_parser(config.parser, default, plain) if config.parser else \
            default if plain else json.loads(default)
    return default if plain else ConfigValue(default)


def _parameter_value(parameter: Any, given: Any) -> Any:
    """A parameter's value: the one given to the pipeline, else its default; an IncludeFile's is the file's text
    (or bytes with is_text=False), a JSONType's the parsed JSON."""
    from metaflow import IncludeFile, JSONType

    # as declared (Metaflow's `init()`, run by its command line, rewrites `kwargs`)
    kwargs = {**getattr(parameter, "kwargs", {}), **(getattr(parameter, "_override_kwargs", None) or {})}
    value = given if given is not None else kwargs.get("default")
    if callable(value):
        value = value(None)
    if isinstance(parameter, IncludeFile) and value is not None:
        overrides = getattr(parameter, "_includefile_overrides", {})
        with open(value, "rb") as handle:
            data = handle.read()
        is_text = overrides.get("is_text", kwargs.get("is_text", True))
        return data.decode(overrides.get("encoding", kwargs.get("encoding") or "utf-8")) if is_text in (True, None) \
            else data
    if kwargs.get("type") is JSONType and isinstance(value, str):
        import json

        return json.loads(value)
    kind = kwargs.get("type")
    if kind in (int, float, str) and value is not None and not isinstance(value, kind):  # as its command line does
        return kind(value)
    return value


def _make_fixed_properties(cls: type, fixed: dict[str, Any]) -> None:
    """Parameters and class-level values read through `self` as read-only properties, as in Metaflow's steps."""
    _originals(cls)
    for var in fixed:
        if not isinstance(cls.__dict__.get(var), property) or getattr(cls.__dict__[var], "fget", None) is None \
                or getattr(cls.__dict__[var].fget, "__name__", "") != "_fixed_value":
            setattr(cls, var, property(_fixed_getter(var), _read_only))


def _fixed_getter(var: str) -> Callable[[Any], Any]:
    def _fixed_value(self: Any) -> Any:
        return self.__dict__["_fixed"][var]

    return _fixed_value


def _read_only(_flow: Any, _value: Any) -> None:
    raise AttributeError("Flow level attributes and Parameters are not modifiable")
