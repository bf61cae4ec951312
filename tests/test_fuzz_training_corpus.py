"""Robustness on real code: task bodies of real training scripts, and mutations of them, compile to a graph or to
diagnostics — never an internal error — and to the same IR every time.

The corpus (tests/corpus/training/) holds functions of pytorch/examples, nanoGPT and accelerate training scripts
as their authors wrote them: unannotated parameters, module-level globals, argparse namespaces, loaders
iterated with tuple targets, nested helpers and closures. Each function becomes a `@dagc.task` called from a
`@dagc.pipeline` that passes its parameters as pipeline parameters or as results of producer tasks, and may go
on with its result (a map, glue, unpacking). Seeded mutations of its body give the shapes a user's edit
produces: statements dropped, duplicated or swapped; the body wrapped in a loop, `torch.no_grad()` or `try`; a
for loop turned into a comprehension or generator expression; a parameter renamed or annotated; a local
returned or yielded; an idiom of training code inserted (starred and walrus targets, `nonlocal`, `match`,
files, seeds); the function made `async`; task options that may contradict the body.

Each program is compiled in process (a graph or errors, never DAGC900 or an exception), then again in another
process and in the opposite order: the IR text must be byte-identical. One program a corpus file also goes
through `dagc check`: exit status 0 or 1 with `error[DAGCnnn]` lines, never 70.
"""

from __future__ import annotations

import ast
import copy
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from dagc.diagnostics import CompileError
from dagc.driver import compile_file
from dagc.ir.parser import parse_graph
from dagc.ir.printer import print_graph
from tests.conftest import REPO, run_dagc
from tests.interpreters import run_python
from tests.test_fuzz_frontend import SECONDS_PER_INPUT, deadline

CORPUS = Path(__file__).resolve().parent / "corpus" / "training"
CORPUS_FILES = sorted(p.name for p in CORPUS.glob("*.py"))
PIPELINE = "corpus_pipeline"
SEED = 20250611
MUTANTS_PER_FUNCTION = 8


# ---- the corpus ----------------------------------------------------------------------------------
def functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef)]


def model_classes(tree: ast.Module) -> list[str]:
    """Module-level classes built without arguments (`Net()`, `VAE()`, `Policy()`): what a model producer returns."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            if init is not None and len(init.args.args) == 1 and not init.args.kwonlyargs:
                found.append(node.name)
    return found


# ---- callers -------------------------------------------------------------------------------------
# a pipeline parameter's default, by the parameter's name (the rest default to None)
LITERALS = {"epoch": "1", "i": "0", "it": "0", "split": "'train'", "device": "'cpu'", "batch_size": "16",
            "bsz": "4", "seq_len": "8", "path": "'model.onnx'", "filename": "'checkpoint.pth.tar'",
            "out_dir": "'out'", "is_best": "False", "topk": "(1,)"}
LOADER = ("torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4), "
          "torch.zeros(8, dtype=torch.long)), batch_size=2, shuffle=True)")
TENSOR_NAMES = {"data", "source", "data_source", "input", "target", "test_input", "test_target", "x", "recon_x",
                "mu", "logvar", "output", "state", "h"}


def producer(name: str, models: list[str]) -> tuple[str, str | None]:
    """What a producer task of parameter `name` returns, and its return annotation."""
    if "loader" in name:
        return LOADER, "torch.utils.data.DataLoader"
    if name in ("model", "seq", "policy", "netD", "netG"):
        return (f"{models[0]}()", models[0]) if models else ("torch.nn.Linear(4, 2)", "torch.nn.Module")
    if "optimizer" in name:
        return "torch.optim.SGD(torch.nn.Linear(4, 2).parameters(), lr=0.1)", "torch.optim.Optimizer"
    if name == "criterion":
        return "torch.nn.CrossEntropyLoss()", "torch.nn.Module"
    if name in ("args", "opt"):
        return "argparse.Namespace(log_interval=10, dry_run=False, print_freq=10, no_accel=True)", \
            "argparse.Namespace"
    if name in ("config", "model_args"):
        return "{'lr': 2e-05, 'num_epochs': 3, 'seed': 42, 'batch_size': 16}", "dict"
    if name in TENSOR_NAMES:
        return "torch.randn(8, 4)", "torch.Tensor"
    if name == "m":
        return "torch.nn.Conv2d(1, 1, 3)", "torch.nn.Module"
    if name in LITERALS:
        return LITERALS[name], None
    return "None", None


def signature(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], list[str]]:
    """Positional and keyword-only parameter names (what a caller passes)."""
    return [a.arg for a in func.args.posonlyargs + func.args.args], [a.arg for a in func.args.kwonlyargs]


def call_of(name: str, positional: list[str], keywords: list[str], values: dict[str, str]) -> str:
    return f"{name}({', '.join([values[p] for p in positional] + [f'{k}={values[k]}' for k in keywords])})"


def caller(func: ast.FunctionDef | ast.AsyncFunctionDef, style: str, models: list[str],
           rnd: random.Random) -> str:
    """Producer tasks and a pipeline calling the task `func` in `style`."""
    positional, keywords = signature(func)
    params = positional + keywords
    if style in ("params", "unpack"):  # the task's parameters are the pipeline's
        head = ", ".join(f"{p}={LITERALS.get(p, 'None')}" for p in params)
        call = call_of(func.name, positional, keywords, {p: p for p in params})
        body = f"    first, second = {call}\n    return [first, second]\n" if style == "unpack" \
            else f"    return {call}\n"
        return f"\n\n@dagc.pipeline\ndef {PIPELINE}({head}):\n{body}"
    tasks, lines = [], []
    for p in params:  # one producer task a parameter, returning what the original script passes
        value, annotation = producer(p, models)
        returns = f" -> {annotation}" if annotation and rnd.random() < 0.5 else ""
        tasks.append(f"\n\n@dagc.task\ndef make_{p}(){returns}:\n    return {value}\n")
        lines.append(f"    {p} = make_{p}()\n")
    if style == "producers":
        call = call_of(func.name, positional, keywords, {p: p for p in params})
        return "".join(tasks) + f"\n\n@dagc.pipeline\ndef {PIPELINE}():\n{''.join(lines)}    return {call}\n"
    if style == "consume":  # the pipeline goes on with the result: a map, glue, unpacking
        call = call_of(func.name, positional, keywords, {p: p for p in params})
        use = rnd.choice(["    return [consume(x) for x in result]\n",
                          "    outs = []\n    for x in result:\n        outs.append(consume(x))\n    return outs\n",
                          "    return sum(consume(x) for (x,) in result)\n",
                          "    return {k: consume(v) for k, v in result.items()}\n",
                          "    first, *rest = result\n    return consume(first), len(rest)\n"])
        tasks.append("\n\n@dagc.task\ndef consume(item):\n    return item\n")
        return "".join(tasks) + f"\n\n@dagc.pipeline\ndef {PIPELINE}():\n{''.join(lines)}    result = {call}\n{use}"
    # "loop": called once an epoch, as the scripts' main loops do; an epoch-like parameter takes the epoch
    values = {p: "epoch" if p in ("epoch", "i", "it") else p for p in params}
    call = call_of(func.name, positional, keywords, values)
    return "".join(tasks) + (f"\n\n@dagc.pipeline\ndef {PIPELINE}(epochs=2):\n{''.join(lines)}    results = []\n"
                             f"    for epoch in range(1, epochs + 1):\n        results.append({call})\n"
                             "    return results\n")


STYLES = ["params", "producers", "loop", "unpack", "consume"]
HEADER = "import argparse\nimport torch\nimport torch.utils.data\n\nimport dagc"


def _future_end(tree: ast.Module) -> int:
    """How many statements open `tree` as `from __future__` imports (what must stay first)."""
    return next((k for k, node in enumerate(tree.body)
                 if not (isinstance(node, ast.ImportFrom) and node.module == "__future__")), len(tree.body))


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    return next(f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name)


def program(source: str, name: str, style: str, rnd: random.Random) -> str:
    """`source` (a corpus module, kept verbatim) with function `name` a task, called from a pipeline in `style`."""
    tree = ast.parse(source)
    func = _function(tree, name)
    lines = source.splitlines()
    lines.insert(min([func.lineno, *(d.lineno for d in func.decorator_list)]) - 1, "@dagc.task")
    future = tree.body[_future_end(tree) - 1].end_lineno if _future_end(tree) else 0
    lines.insert(future, HEADER)
    return "\n".join(lines) + "\n" + caller(func, style, model_classes(tree), rnd)


def mutant_program(tree: ast.Module, func: ast.FunctionDef | ast.AsyncFunctionDef, style: str,
                   rnd: random.Random) -> str:
    """A mutated corpus module, unparsed, with `func` a task (perhaps with options), called in `style`."""
    positional, keywords = signature(func)
    params = positional + keywords or ["model"]
    decorator = rnd.choice(["dagc.task", "dagc.task", "dagc.task(cost='1s')", "dagc.task(pure=True)",
                            "dagc.task(side_effects=True)", f"dagc.task(readonly=[{rnd.choice(params)!r}])",
                            f"dagc.task(mutates=[{rnd.choice(params)!r}])"])
    func.decorator_list.insert(0, expr(decorator))
    tree.body[_future_end(tree):_future_end(tree)] = ast.parse(HEADER).body
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n" + caller(func, style, model_classes(tree), rnd)


# ---- mutations of a function's body ----------------------------------------------------------------
def blocks(func: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list in `func`: its body, and the bodies of its loops, branches, withs, trys, defs."""
    found: list[list[ast.stmt]] = []

    def visit(stmts: list[ast.stmt]) -> None:
        found.append(stmts)
        for stmt in stmts:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    visit(inner)
            for handler in getattr(stmt, "handlers", []):
                visit(handler.body)

    visit(func.body)
    return found


def statements(func: ast.AST) -> list[tuple[list[ast.stmt], int]]:
    return [(block, i) for block in blocks(func) for i in range(len(block))]


def local_names(func: ast.AST) -> list[str]:
    """Names the function assigns (not its parameters), in order of first assignment."""
    names: dict[str, None] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id != "_":
            names[node.id] = None
    return list(names)


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def stmt(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


Mutation = Callable[[ast.FunctionDef, random.Random], bool]


def drop_statement(func: ast.FunctionDef, rnd: random.Random) -> bool:
    block, i = rnd.choice(statements(func))
    del block[i]
    if not block:
        block.append(ast.Pass())
    return True


def duplicate_statement(func: ast.FunctionDef, rnd: random.Random) -> bool:
    block, i = rnd.choice(statements(func))
    block.insert(i + 1, copy.deepcopy(block[i]))
    return True


def swap_statements(func: ast.FunctionDef, rnd: random.Random) -> bool:
    pairs = [(block, i) for block in blocks(func) for i in range(len(block) - 1)]
    if not pairs:
        return False
    block, i = rnd.choice(pairs)
    block[i], block[i + 1] = block[i + 1], block[i]
    return True


def wrap_in_loop(func: ast.FunctionDef, rnd: random.Random) -> bool:
    loop = stmt("for _ in range(2):\n    pass")
    loop.body = func.body
    func.body = [loop]
    return True


def wrap_in_no_grad(func: ast.FunctionDef, rnd: random.Random) -> bool:
    with_ = stmt("with torch.no_grad():\n    pass")
    with_.body = func.body
    func.body = [with_]
    return True


def wrap_in_try(func: ast.FunctionDef, rnd: random.Random) -> bool:
    try_ = stmt("try:\n    pass\nexcept KeyboardInterrupt:\n    print('Exiting from training early')")
    try_.body = func.body
    func.body = [try_]
    return True


def loop_to_comprehension(func: ast.FunctionDef, rnd: random.Random) -> bool:
    """A for loop becomes a comprehension or generator expression over the same iterable and target."""
    loops = [(block, i) for block, i in statements(func)
             if isinstance(block[i], ast.For) and not block[i].orelse]
    if not loops:
        return False
    block, i = rnd.choice(loops)
    loop = block[i]
    clause = ast.comprehension(target=loop.target, iter=loop.iter, ifs=[], is_async=0)
    conditions = [s.test for s in loop.body if isinstance(s, ast.If)]
    if conditions and rnd.random() < 0.5:
        clause.ifs = [rnd.choice(conditions)]
    last = loop.body[-1]
    values = [s.value for s in ast.walk(loop) if isinstance(s, (ast.Expr, ast.Assign, ast.AugAssign, ast.Return))
              and s.value is not None and s is not loop]
    if isinstance(last, ast.AugAssign) and isinstance(last.target, ast.Name):  # total += e: total += sum(...)
        new: ast.stmt = ast.AugAssign(target=last.target, op=last.op, value=ast.Call(
            func=ast.Name("sum", ast.Load()), args=[ast.GeneratorExp(elt=last.value, generators=[clause])],
            keywords=[]))
    elif isinstance(last, ast.Assign) and isinstance(last.targets[0], ast.Subscript):  # d[k] = e: d.update({...})
        target = last.targets[0]
        new = ast.Expr(ast.Call(func=ast.Attribute(target.value, "update", ast.Load()), args=[ast.DictComp(
            key=target.slice, value=last.value, generators=[clause])], keywords=[]))
    else:  # a value the body computes, collected in a list, a set or a generator
        elt = rnd.choice(values) if values else expr("None")
        kind = rnd.choice(["list", "set", "gen", "any"])
        comp = {"list": ast.ListComp, "set": ast.SetComp}.get(kind, ast.GeneratorExp)(elt=elt, generators=[clause])
        if kind == "any":
            comp = ast.Call(func=ast.Name("any", ast.Load()), args=[comp], keywords=[])
        new = ast.Assign(targets=[ast.Name("collected", ast.Store())], value=comp)
    block[i] = new
    return True


def rename_parameter(func: ast.FunctionDef, rnd: random.Random) -> bool:
    """A parameter renamed where it is declared and wherever the function reads it."""
    params = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
    if not params:
        return False
    arg = rnd.choice(params)
    old, new = arg.arg, arg.arg + "_renamed"
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
        elif isinstance(node, ast.arg) and node.arg == old:
            node.arg = new
    return True


def rename_parameter_in_signature(func: ast.FunctionDef, rnd: random.Random) -> bool:
    """A parameter renamed where it is declared only: the body's reads become a global's or no one's."""
    params = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
    if not params:
        return False
    arg = rnd.choice(params)
    arg.arg += "_renamed"
    return True


def return_local(func: ast.FunctionDef, rnd: random.Random) -> bool:
    names = local_names(func)
    if not names:
        return False
    picked = rnd.sample(names, min(len(names), rnd.choice([1, 2])))
    ret = stmt(f"return {', '.join(picked)}")
    if func.body and isinstance(func.body[-1], ast.Return):
        func.body[-1] = ret
    else:
        func.body.append(ret)
    return True


def return_in_loop(func: ast.FunctionDef, rnd: random.Random) -> bool:
    loops = [s for s in ast.walk(func) if isinstance(s, (ast.For, ast.While))]
    names = local_names(func)
    if not loops or not names:
        return False
    rnd.choice(loops).body.append(stmt(f"return {rnd.choice(names)}"))
    return True


def yield_local(func: ast.FunctionDef, rnd: random.Random) -> bool:
    names = local_names(func) or ["None"]
    block, i = rnd.choice(statements(func))
    block.insert(i + 1, stmt(f"yield {rnd.choice(names)}"))
    return True


def annotate_parameters(func: ast.FunctionDef, rnd: random.Random) -> bool:
    """The parameters annotated with the type of what the original script passes (a loader, a model, ...)."""
    changed = False
    for arg in func.args.posonlyargs + func.args.args + func.args.kwonlyargs:
        annotation = producer(arg.arg, [])[1]
        if annotation is not None and arg.annotation is None:
            arg.annotation = expr(annotation)
            changed = True
    return changed


# statements training code writes, about one of the function's names (`{v}`)
IDIOMS = [
    "total = sum(float(x.sum()) for (x,) in {v})",
    "for (a, *rest) in {v}:\n    pass",
    "found = [y for x in {v} if (y := x)]",
    "pairs = [[a for a in b] for b in {v} for _ in b]",
    "for i, x in enumerate({v}, start=1):\n    x.add_(i)\nelse:\n    pass",
    "def inner():\n    nonlocal {v}\n    {v} = None\ninner()",
    "global {v}",
    "del {v}",
    "match {v}:\n    case [a, b]:\n        pass\n    case {{'k': c}}:\n        pass\n    case _:\n        pass",
    "class Local:\n    attr = {v}\n\n    def get(self):\n        return {v}",
    "f = lambda q={v}: q + {v}",
    "yield from {v}",
    "{v}.x, {v}[0] = 1, 2",
    "{v}[::2] = {v}[1::2]",
    "setattr({v}, 'a', 1)",
    "with open('log.txt', 'a') as fh, torch.no_grad():\n    fh.write(str({v}))",
    "torch.save({v}, f'{{{v}}}/ckpt.pt')",
    "import os\nos.environ['RANK'] = str({v})",
    "torch.manual_seed({v})",
    "try:\n    pass\nfinally:\n    return {v}",
    "while {v}:\n    {v} = {v}.next",
    "{v}, = {v}",
    "@torch.no_grad()\ndef helper(q={v}):\n    return q\nhelper()",
    "print(*{v}, sep='', **{{'end': ''}})",
    "stats = {{k: q for k, q in {v}.items()}}",
]


def insert_idiom(func: ast.FunctionDef, rnd: random.Random) -> bool:
    names = [a.arg for a in func.args.posonlyargs + func.args.args] + local_names(func) or ["x"]
    block, i = rnd.choice(statements(func))
    block[i + 1:i + 1] = ast.parse(rnd.choice(IDIOMS).format(v=rnd.choice(names))).body
    return True


def make_async(func: ast.FunctionDef, rnd: random.Random) -> bool:
    return True  # `mutate` turns the function into an `async def`


MUTATIONS: list[Mutation] = [drop_statement, duplicate_statement, swap_statements, wrap_in_loop, wrap_in_no_grad,
                             wrap_in_try, loop_to_comprehension, rename_parameter, rename_parameter_in_signature,
                             return_local, return_in_loop, yield_local, annotate_parameters, insert_idiom,
                             make_async]
# the likelier mutations: those that keep most programs compiling, so later stages see them
WEIGHTS = [3, 3, 2, 2, 2, 1, 4, 2, 1, 3, 1, 1, 2, 3, 1]


def mutate(source: str, name: str, rnd: random.Random) -> tuple[str, ast.Module, ast.AST] | None:
    """1-2 mutations of function `name` in `source`: (their names, the module, the function); None if none applied."""
    tree = ast.parse(source)
    func = _function(tree, name)
    applied = []
    for mutation in rnd.choices(MUTATIONS, WEIGHTS, k=rnd.choice([1, 1, 2])):
        if mutation(func, rnd):
            applied.append(mutation.__name__)
            if mutation is make_async and isinstance(func, ast.FunctionDef):
                index = tree.body.index(func)
                func = tree.body[index] = ast.AsyncFunctionDef(**{f: getattr(func, f) for f in func._fields})
    return ("+".join(applied), tree, func) if applied else None


def variants(path: Path) -> list[tuple[str, str]]:
    """(label, program) for every function of corpus file `path`: its own code in every call style, then
    MUTANTS_PER_FUNCTION mutants (seeded by the file and the function, so that each run compiles the same)."""
    source = path.read_text(encoding="utf-8")
    found = []
    for func in functions(ast.parse(source)):
        rnd = random.Random(f"{SEED}:{path.name}:{func.name}")
        for style in STYLES:
            found.append((f"{func.name}[{style}]", program(source, func.name, style, rnd)))
        for _ in range(MUTANTS_PER_FUNCTION):
            mutant = mutate(source, func.name, rnd)
            if mutant is not None:
                style = rnd.choice(STYLES)
                found.append((f"{func.name}[{style}]:{mutant[0]}", mutant_program(mutant[1], mutant[2], style, rnd)))
    return found


# ---- checks --------------------------------------------------------------------------------------
def compile_ir(path: Path) -> str | None:
    """The IR text of `path`'s pipeline, or None when it has errors; fails on an internal error."""
    with deadline(SECONDS_PER_INPUT):
        try:
            graph = compile_file(path, pipeline_name=PIPELINE)
        except CompileError as exc:
            internal = [d for d in exc.diagnostics if d.code == "DAGC900"]
            assert not internal, internal[0].hint
            assert any(d.is_error for d in exc.diagnostics), exc.diagnostics
            return None
    text = print_graph(graph)
    assert print_graph(parse_graph(text)) == text
    return text


ERROR_LINE = re.compile(r"^\S+:\d+:\d+: error\[DAGC\d{3}\]: |^error\[DAGC\d{3}\]: ", re.MULTILINE)

# compiles the programs named on its command line, last first, writing each one's IR beside it (NAME.ir)
RECOMPILE = f"""
import sys
from pathlib import Path

from dagc.driver import compile_file
from dagc.ir.printer import print_graph

for path in map(Path, reversed(sys.argv[1:])):
    path.with_suffix(".ir").write_text(print_graph(compile_file(path, pipeline_name={PIPELINE!r})), encoding="utf-8")
"""


def test_corpus_holds_real_training_scripts() -> None:
    counts = {}
    for name in CORPUS_FILES:
        text = (CORPUS / name).read_text(encoding="utf-8")
        assert text.startswith("# From "), f"{name}: its first line names the script it comes from"
        counts[name] = len(functions(ast.parse(text)))
    assert len(counts) >= 8 and sum(counts.values()) >= 20 and all(counts.values()), counts


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_functions_compile_without_internal_errors(tmp_path: Path, name: str) -> None:
    checked: list[tuple[str, Path, str | None]] = []
    for k, (label, text) in enumerate(variants(CORPUS / name)):
        path = tmp_path / f"v{k:03d}.py"
        path.write_text(text, encoding="utf-8")
        try:
            checked.append((label, path, compile_ir(path)))
        except BaseException as exc:
            raise AssertionError(f"{name} {label} ({path}) failed: {exc!r}") from exc
    clean = [c for c in checked if c[2] is not None]
    failing = [c for c in checked if c[2] is None]
    assert clean, f"no variant of {name} compiles"

    # compiled again in another process (another hash seed: another order of sets) and in the opposite order
    # (nothing one compile leaves behind may change the next): byte for byte the same IR
    proc = run_python(["-c", RECOMPILE, *(str(path) for _, path, _ in clean)], cwd=REPO, capture_output=True,
                      text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for label, path, text in clean:
        assert path.with_suffix(".ir").read_text(encoding="utf-8") == text, \
            f"{name} {label} ({path}): two compiles print different IR"

    # the command line: `dagc check` agrees, and reports errors as diagnostics (exit status 1), never as an
    # internal error (70)
    label, path, text = random.Random(f"{SEED}:{name}:cli").choice(failing or clean)
    proc = run_dagc("check", str(path))
    where = f"dagc check {name} {label} ({path}):\n{proc.stderr}"
    assert proc.returncode == (0 if text is not None else 1), where
    assert "internal error" not in proc.stderr and "DAGC900" not in proc.stderr, where
    if proc.returncode == 1:
        assert ERROR_LINE.search(proc.stderr), where
