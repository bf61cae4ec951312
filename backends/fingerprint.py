"""One fingerprint per task, the same for every backend, so a run directory or a cache written by
one backend is reused by another.

A task's fingerprint hashes what decides its output: its target and operands (as IR JSON), the
source text of its function (decorators included: editing a task's code changes its fingerprint,
so `--resume` reruns it), the options that can change what it computes (not estimates such as
`cost` or a map's expected width, nor run policy such as `retries`), dagc's IR version, and the
fingerprints of the values it reads. A fused group or a region hashes each task inside it the same way. Transfers pass their
input's fingerprint through (they move a value, they do not change it).

State has versions: a task touching a piece of state (a model trained in place, the global random
generator; dagc.ir.effects) also hashes the fingerprint of the last task before it that may have
changed that state. So `test(model)` after the second epoch is another computation than after the
first, although its call is the same, and a chain of changes is identified by all of its links.
"""

from __future__ import annotations

import ast
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from dagc.ir.core import REGION_OPS, Graph, Node, region_bodies
from dagc.ir.regions import TRIPS_ATTR, WIDTH_ATTR, walk
from dagc.ir.serialize import operand_to_json, options_to_json
from dagc.ir.types import operand_to_python
from dagc.runtime.code import definitions
from dagc.runtime.executor import CONTENT_KEYED, NEVER_REUSED
from dagc.runtime.store import fingerprint, output_fingerprint, value_fingerprint
from dagc.runtime.threads import declared_threads

__all__ = ["task_fingerprints", "task_rows", "try_body_nodes", "try_body_rows", "source_digest", "RUN_POLICY_OPTIONS"]

# options that say how to run or estimate a task, not what it computes
RUN_POLICY_OPTIONS = frozenset({"cost", "flops", "out_size", "priority", "retries", "timeout", "cache",
                                "preemptible"})
# a region's estimates, for planning only: a learned map width (dagc.learned) must not make the next
# compile's region another computation than the one the cache holds
_ESTIMATE_ATTRS = frozenset({WIDTH_ATTR, TRIPS_ATTR})

# What a fingerprint's description means: raised when it changes meaning, so that no stored output is
# taken for another's. Not the IR's file format (dagc.ir.serialize.FORMAT_VERSION): a new way of writing
# the same graph leaves every stored output valid.
SCHEME = 2


def _function_sources(path: str) -> dict[str, str]:
    """`qualified name → hash of its source` for every function of a file (empty when unreadable)."""
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    return definitions(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _parsed_signatures(path: str, mtime_ns: int, size: int) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """`qualified name → (positional parameter names, *args name)` for every function of a file."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    out: dict[str, tuple[tuple[str, ...], str | None]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = stmt.args
                out[prefix + stmt.name] = (tuple(x.arg for x in (*a.posonlyargs, *a.args)),
                                           a.vararg.arg if a.vararg else None)
            elif isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{prefix}{stmt.name}.")

    visit(tree.body, "")
    return out


def assumed_effects(graph: Graph, node: Node, drawers: frozenset[str] | None = None) -> tuple | None:
    """What the compiler assumes task `node` may change, for the run-time check
    (dagc.runtime.effectcheck): (params, mutable params, rng, files, module names, own params, again, alone);
    None when the task is not checked (fused groups, regions, a signature dagc cannot read). `alone`: no other
    task draws from a global generator without seeding it (`drawers`: those that do), so a draw the compiler
    did not see changes no other task's result: the run records it instead of stopping."""
    from dagc.ir.effects import node_effects
    from dagc.ir.types import Ref, iter_refs

    if node.op != "task" or not node.target or ":" not in node.target:
        return None
    module, _, function = node.target.partition(":")
    file = graph.modules.get(module)
    if file is None:
        return None
    path = str((Path(graph.root) / file).resolve())
    try:
        stat = os.stat(path)
    except OSError:
        return None
    found = _parsed_signatures(path, stat.st_mtime_ns, stat.st_size).get(function)
    if found is None:
        return None
    positional, vararg = found
    if positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    effects = node_effects(node)
    mutated = set(effects.mutates)
    mutable: set[str] = set()
    own: set[str] = set()
    params = list(positional) + ([vararg] if vararg else [])
    bound = [(positional[i] if i < len(positional) else vararg or f"#{i}", a) for i, a in enumerate(node.args)]
    for param, operand in [*bound, *node.kwargs]:
        # a value built at the call (a literal list) is the task's own: only a shared value is checked
        if not isinstance(operand, Ref):
            own.add(param)
        elif {_origin(graph, v) for v in iter_refs(operand)} & mutated:  # (the value a transfer brought)
            mutable.add(param)
    anything = node.options.side_effects or effects.io is not None
    # a pure task's draws were declared not to matter (DAGC150's hint): not a surprise at run time
    row = (tuple(params), tuple(sorted(mutable | own)), bool(effects.rng) or node.options.side_effects
           or node.options.pure, effects.files == "write" or anything, tuple(sorted(effects.writes)),
           tuple(sorted(own - mutable)))
    alone = drawers is not None and not (drawers - {node.name})
    if alone:
        return (*row, computes_the_same_again(node), True)
    return (*row, True) if computes_the_same_again(node) else row


def _origin(graph: Graph, value: str) -> str:
    """The value a chain of transfers moved to `value` (the name the effects attributes use), else `value`."""
    for _ in range(64):
        producer = graph.producer(value)
        if producer is None or producer.op != "transfer" or not producer.input_values():
            return value
        value = producer.input_values()[0]
    return value


def unseeded_drawers(graph: Graph) -> frozenset[str]:
    """The nodes that draw from a global generator without seeding it themselves (a region: if a task in it does)."""
    from dagc.ir.effects import node_effects

    out = set()
    for node in graph:
        effects = node_effects(node)
        if effects.depends_on_rng and not node.options.pure:
            out.add(node.name)
    return frozenset(out)


def computes_the_same_again(node: Node) -> bool:
    """Whether running task `node` again on the same inputs gives the same output: it changes nothing,
    acts on nothing, reads no file and no module-level name another task changes, draws from no
    generator it does not seed itself, and reads neither the clock, the process id nor a fresh UUID. The
    local program may then compute such a task's output again rather than store it
    (dagc.runtime.executor, `recompute`)."""
    from dagc.ir.effects import node_effects

    effects = node_effects(node)
    varies = any(m.effects.varies for m in (node, *walk(node)))  # the clock, a UUID: another value
    return not (node.options.side_effects or effects.mutates or effects.io or effects.writes or effects.reads
                or effects.files or varies or (effects.depends_on_rng and not node.options.pure))


def source_digest(graph: Graph, target: str | None) -> str | None:
    """Hash of the source of a task's function (`module:function`), or None when it cannot be read."""
    if not target or ":" not in target:
        return None
    module, _, function = target.partition(":")
    file = graph.modules.get(module)
    if file is None:
        return None
    return _function_sources(str((Path(graph.root) / file).resolve())).get(function)


def _describe(graph: Graph, node: Node) -> dict[str, Any]:
    """What, besides its inputs, decides one node's output."""
    options = {k: v for k, v in options_to_json(node.options).items() if k not in RUN_POLICY_OPTIONS}
    data: dict[str, Any] = {
        "op": node.op, "target": node.target,
        "args": [operand_to_json(a) for a in node.args],
        "kwargs": [[k, operand_to_json(v)] for k, v in node.kwargs],
        "outputs": len(node.outputs), "options": options,
    }
    if node.op == "task":
        data["source"] = source_digest(graph, node.target)
    if node.op == "fused":
        from dagc.backends.toolkit import fused_members

        data["members"] = [_describe(graph, m) for m in fused_members(node)]
    if node.op in REGION_OPS:  # the bodies decide the outputs too
        region = {k: v for k, v in node.attrs.items() if k.startswith("region.") and k not in _ESTIMATE_ATTRS}
        region.update(_payload_described(node))
        data["region"] = dict(sorted(region.items()))
        data["bodies"] = {key: [_describe(graph, n) for n in body] for key, body in region_bodies(node).items()}
    return data


def _payload_described(node: Node) -> dict[str, Any]:
    """A region's payload described as it always was (the attributes of IR version 2), so that a run
    directory or cache written before keeps serving regions too."""
    region = node.region
    if region is None:
        return {}
    ops = lambda values: [operand_to_json(o) for o in values]  # noqa: E731
    out: dict[str, Any] = {}
    for body, values in region.yields.items():
        key = "region.yield" if node.op in ("loop", "map") and body == "body" else f"region.{body}.yield"
        out[key] = ops(values)
    if node.op == "loop":
        out["region.carried"] = list(region.args.get("body", ()))
        out["region.iter"] = None if region.iter is None else operand_to_json(region.iter)
        exit_ = region.exit
        out["region.break"] = None if exit_ is None else {"at": exit_.at, "cond": operand_to_json(exit_.cond),
                                                          "yield": ops(exit_.values)}
    if node.op == "map":
        out["region.items"] = list(region.args.get("body", ()))
        out["region.init"] = ops(region.init)
    return out


def _positional(data: Any, position: dict[str, int]) -> Any:
    """`data` with every `{"ref": NAME}` of an input replaced by `{"input": INDEX}`."""
    if isinstance(data, dict):
        if len(data) == 1 and "ref" in data and data["ref"] in position:
            return {"input": position[data["ref"]]}
        return {k: _positional(v, position) for k, v in data.items()}
    if isinstance(data, list):
        return [_positional(v, position) for v in data]
    return data


def _param_literal(value: Any) -> Any:
    try:
        return repr(operand_to_python(value))
    except TypeError:
        return json.dumps(operand_to_json(value), sort_keys=True)


def _node_fingerprint(graph: Graph, node: Node, values: dict[str, str], version: str | None = None) -> str:
    """`node`'s fingerprint from the fingerprints of the values it reads (and `version`, the fingerprint
    of the last change to the state it touches); records its outputs' in `values`."""
    inputs = [values.get(v, f"unbound:{v}") for v in node.input_values()]
    if version is not None:
        inputs.append(f"state:{version}")
    # inputs are named by position: a pass that renames a value (a transfer) changes nothing here
    position = {v: i for i, v in enumerate(node.input_values())}
    described = _positional(_describe(graph, node), position)
    constants = json.dumps({"ir": SCHEME, **described}, sort_keys=True, default=str)
    fp = fingerprint(node.target or node.op, constants, inputs)
    for i, value in enumerate(node.outputs):
        values[value] = output_fingerprint(fp, i)
    return fp


def _fingerprint_values(graph: Graph) -> tuple[dict[str, str], dict[str, str]]:
    """(fingerprint of every node that runs, fingerprint of every value)."""
    values: dict[str, str] = {p.name: value_fingerprint(p.name, _param_literal(p.value)) for p in graph.params}
    out: dict[str, str] = {}
    changed_by = _last_changes(graph)
    for name in graph.topological_order():
        node = graph.node(name)
        if node.op == "transfer":  # skipped: its output is its input
            inputs = [values.get(v, f"unbound:{v}") for v in node.input_values()]
            for value in node.outputs:
                values[value] = inputs[0] if inputs else fingerprint("transfer", name)
            continue
        prior = changed_by.get(name)
        out[name] = _node_fingerprint(graph, node, values, out.get(prior, prior) if prior else None)
    return out, values


def code_table(graph: Graph) -> tuple[dict[str, tuple], dict[str, str]]:
    """What the program hashes when it starts (dagc.runtime.code): per task, the code it runs (its own
    function and the functions and classes of the user's it reaches), the tasks whose fingerprints feed
    its own (producers of its inputs, the last change of its state) and the code's digest now; and the
    files of the user's modules."""
    from dagc.runtime.code import code_digest

    changed_by = _last_changes(graph)
    producer: dict[str, str] = {}
    for node in graph:
        for value in node.outputs:
            producer[value] = node.name
    files = dict(sorted(graph.modules.items()))
    root = Path(graph.root)
    table: dict[str, tuple] = {}
    for name in graph.topological_order():
        node = graph.node(name)
        if node.op == "transfer":
            continue
        members = [n for n in (node, *walk(node)) if n.op == "task" and n.target]
        names: dict[str, None] = {}
        for m in members:
            names[m.target] = None
            names.update(dict.fromkeys(m.attrs.get("code.reaches") or ()))
        upstream: dict[str, None] = {}
        for value in node.input_values():
            source = producer.get(value)
            while source is not None and graph.node(source).op == "transfer":  # a transfer moves a value
                inputs = graph.node(source).input_values()
                source = producer.get(inputs[0]) if inputs else None
            if source is not None:
                upstream[source] = None
        if name in changed_by:
            upstream[changed_by[name]] = None
        key = tuple(names)
        table[name] = (key, tuple(upstream), code_digest(key, root, files))
    return table, files


def _last_changes(graph: Graph) -> dict[str, str]:
    """For each node touching a piece of state, the last node before it (program order) that may have
    changed that state. The state analysis orders that node before it, so its fingerprint is known."""
    from dagc.ir.effects import node_effects, state_groups

    out: dict[str, str] = {}
    for group in state_groups(graph):
        last: str | None = None
        for name in group.nodes:
            if last is not None:
                out[name] = last
            effects = node_effects(graph.node(name))
            if effects.mutates or effects.writes or effects.rng:
                last = name
    return out


def task_fingerprints(graph: Graph) -> dict[str, str]:
    """Fingerprint of every node that runs (transfers are skipped: their output is their input)."""
    return _fingerprint_values(graph)[0]


def try_body_nodes(graph: Graph) -> dict[str, tuple[Node, str]]:
    """The nodes in the body of each top-level `try` region (and of `try` regions directly in such a
    body), with their fingerprints. The local program stores each of them like a top-level task, so
    that `--resume` after a failure in the body reruns only what did not finish; the finally body is
    never stored: it runs on every run."""
    _, values = _fingerprint_values(graph)
    out: dict[str, tuple[Node, str]] = {}

    def visit(region: Node) -> None:
        for inner in region_bodies(region).get("body", []):
            out[inner.name] = (inner, _node_fingerprint(graph, inner, values))
            if inner.op == "try":
                visit(inner)

    for node in graph:
        if node.op == "try":
            visit(node)
    return out


def task_rows(graph: Graph, final_state: bool = False) -> dict[str, tuple]:
    """The executor's table (dagc.runtime.executor): task → TaskRow (fingerprint, retries, timeout, cache,
    state group, assumed effects, threads declared, memory declared). A fused group or region is retried as often as its most retried task, has a timeout
    only when every task inside has one (their sum, once per trip of a loop being unknown: none for a
    loop), and is cached only when every task inside may be. A task that acts on the world
    (side_effects, or effects the compiler found) is never taken from the cache. A state group whose returned
    object a task changes after the task that made it is never reused, unless `final_state`: the program then
    stores that group as it is at its end (`final_state_groups`; the local program does)."""
    from dagc.ir.effects import state_groups
    from dagc.runtime.rows import TaskRow

    fps = task_fingerprints(graph)
    state = {task: k for k, group in enumerate(state_groups(graph)) for task in group.nodes}
    returned = {} if final_state else _returned_state(graph)
    rows: dict[str, tuple] = {}
    # a draw the compiler did not see is harmless only where no other task could depend on the generator: no
    # other task at all (another may draw unseen too, through a library dagc does not know: on Ray or torch it
    # would then draw the same numbers, where plain Python draws the next ones)
    drawers = unseeded_drawers(graph) if len(fps) == 1 else None
    for name, fp in fps.items():
        node = graph.node(name)
        threads = task_threads(node)
        row = _row(node, fp, state.get(name))
        if state.get(name) in returned:
            row = (*row[:3], f"{NEVER_REUSED}`{name}` shares an object that the pipeline returns and tasks "
                   f"change in place ({returned[state[name]]}): its stored outputs do not hold that object's "
                   "final state", row[4])
        memory = node.options.memory if node.op == "task" else None  # (the call's own: `train.options(memory=...)`)
        rows[name] = TaskRow(*row, assumed_effects(graph, node, drawers), threads, memory=memory)
    return _downstream_of_uncached(graph, rows)


# nodes that run as one unit of the executor and may be keyed on what they read (`try` stores its body's tasks)
_KEYABLE = ("task", "glue", "fused", "cond", "loop", "map")


def key_values(node: Node, rows: dict[str, tuple], names: Any) -> str:
    """`, key_values=(a, b, )` for a glue node, fused group or region keyed on the content of the values it reads from
    outside (CONTENT_KEYED): it takes no arguments, so the executor is given them for the key; "" otherwise."""
    row = rows.get(node.name)
    if node.op == "task" or row is None or not (isinstance(row[3], str) and row[3].startswith(CONTENT_KEYED)):
        return ""
    return f", key_values=({''.join(f'{names[v]}, ' for v in node.input_values()).rstrip(' ')})"


def _downstream_of_uncached(graph: Graph, rows: dict[str, tuple]) -> dict[str, tuple]:
    """A task that reads the output of one never taken from the cache is not taken from it either: the upstream
    runs again and may give another output (it acts on the world), while the stored output downstream was
    computed from the old one and its fingerprint cannot tell."""
    producer = {value: node.name for node in graph for value in node.outputs}
    varies: set[str] = set()  # tasks whose output, computed again, may differ (and those reading one)
    for name in graph.topological_order():
        node = graph.node(name)
        members = [m for m in (node, *walk(node)) if m.op == "task"]
        if any(m.options.side_effects or m.effects.io for m in members):
            varies.add(name)
        row = rows.get(name)
        ups = []
        for value in node.input_values():
            up = producer.get(value)
            while up is not None and graph.node(up).op == "transfer":  # a transfer moves a value
                inputs = graph.node(up).input_values()
                up = producer.get(inputs[0]) if inputs else None
            ups.append((up, "reads the output of"))
        # (a task ordered after one that acts on the world, a file it writes before this one reads it)
        ups += [(dep, "runs after") for dep in node.deps]
        for up, how in ups:
            if up is None or up not in varies:
                continue
            varies.add(name)
            if row is not None and row[3] is True:
                why = (f"it {how} `{up}`, which is computed again on every run (it acts on the world) and may "
                       "change what it reads" + (_unnamed_files(node, graph.node(up)) if how == "runs after" else ""))
                # keyed on the content of what it reads too (a task's arguments, the values a group or region
                # reads from outside), its stored output is reused when they are what they were
                # (dagc.runtime.executor); not a state group's task, whose objects live on in its process
                keyed = node.op in _KEYABLE and row[4] is None
                rows[name] = (*row[:3], f"{CONTENT_KEYED}{why}" if keyed else why, *row[4:])
            break
    return rows


def _unnamed_files(reader: Node, writer: Node) -> str:
    """What to declare so that `reader` no longer follows `writer` in file order (ir/effects.py: a task whose files
    are all named follows only the writers of those files): '' when both name theirs (the writer may write one it
    reads) or the order is not one of files."""
    if writer.op != "task" or writer.effects.files != "write" or not reader.effects.files:
        return ""
    unnamed = []
    if writer.effects.paths is None:
        unnamed.append(f"the files `{writer.name}` writes (`writes=[...]`)")
    if reader.op == "task" and reader.effects.paths is None:
        unnamed.append("the files it reads (`reads=[...]`)")
    return f"; declare {' and '.join(unnamed)} to keep the two independent" if unnamed else ""


def final_state_groups(graph: Graph) -> tuple[int, ...]:
    """The state groups (by index) a program must store as they are at the group's end to reuse them: the
    pipeline returns an object of theirs that a task changes after the task that made it."""
    return tuple(sorted(_returned_state(graph)))


def _returned_state(graph: Graph) -> dict[int, str]:
    """State groups (by index) of which the pipeline returns an object that a task changes in place after
    the task that made it finished, with the first such value and the task. Their tasks are never reused:
    a task's stored outputs are its return values as they were when it finished, not the objects later
    tasks changed in place (a list appended to, a model trained), so a reused group would return the
    objects' first state. A returned object nothing changes after it was made (a summary the group's last
    task builds) is stored as the pipeline ends with it, and its group is reused."""
    from dagc.ir.effects import changed_after_made, state_cell_groups
    from dagc.ir.types import iter_refs

    cells = state_cell_groups(graph)
    returned = [v for v in iter_refs(graph.returns) if v in cells] if graph.returns is not None else []
    changed = changed_after_made(graph, returned)
    out: dict[int, str] = {}
    for value in returned:
        if value in changed:
            out.setdefault(cells[value], f"`%{value}`, changed by `{changed[value]}`")
    return out


def task_threads(node: Node) -> int | None:
    """The threads a task (a fused group, a region: its largest) declares with `cpus=`
    (dagc.runtime.threads); None when none does."""
    counts = [declared_threads(m.options.cpus) for m in (node, *walk(node)) if m.op in ("task", "fused")]
    declared = [c for c in counts if c is not None]
    return max(declared) if declared else None


def _row(node: Node, fp: str, state: int | None) -> tuple[str, int, float | None, bool, int | None]:
    members = [n for n in (node, *walk(node)) if n.op == "task"]
    retries = max([node.options.retries, *(m.options.retries for m in members)])
    timeouts = [m.options.timeout for m in members]
    timeout = node.options.timeout if node.op == "task" else (
        sum(timeouts) if timeouts and node.op == "fused" and all(t for t in timeouts) else None)  # type: ignore[misc]
    return (fp, retries, timeout, _cacheable(members), state)


def _cacheable(members: list[Node]) -> bool | str:
    """True, or why the task is never taken from the cache (the run says so when --cache is used)."""
    for m in members:
        if not m.options.cache:
            return f"`{m.name}` is declared cache=False"
        if m.options.side_effects:
            return f"`{m.name}` is declared side_effects=True"
        if m.effects.io:
            return f"`{m.name}` acts on the world: {m.effects.io}"
    return True


def try_body_rows(graph: Graph) -> dict[str, tuple[str, int, float | None, bool, int | None]]:
    """Executor rows of the nodes `try_body_nodes` finds (the local program stores each of them)."""
    return {name: _row(node, fp, None) for name, (node, fp) in try_body_nodes(graph).items()}
