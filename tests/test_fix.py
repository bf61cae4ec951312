"""`dagc fix`: each diagnostic with a fix, on a small script that raises it. After the fix the script checks
clean, only the lines the fix names changed (every other line, comments and odd spacing included, is kept
byte for byte), the local program computes what the plain run computes (the plain run of the script as
written too, where that runs), `--diff` shows the same change without writing it, and a second `dagc fix` has
nothing left to do."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dagc.apply_fixes import apply_edits
from dagc.backends import emit
from dagc.driver import compile_file
from dagc.fixes import SetOption
from dagc.ir.location import SourceSpan
from tests.conftest import run_dagc
from tests.engines import run_local
from tests.interpreters import run_python
from tests.plain import plain_result


@dataclass(frozen=True)
class Case:
    code: str  # the diagnostic the script raises
    source: str
    changed: frozenset[int]  # the lines of `source` the fix rewrites or removes (1-based)
    added: tuple[str, ...]  # lines the fixed script has that `source` has not
    pipeline: str = "main"
    left: frozenset[str] = frozenset()  # what `dagc check` still says after the fix (warnings)
    # the script as written runs plain, and the fixed one computes what it computed (False: it does not run, or
    # the fix changes what it computes on purpose)
    runs_as_before: bool = True


NO_IMPORT = Case("DAGC003", '''\
"""Mean of a range."""
from __future__ import annotations

import statistics  # the standard library


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.task
def mean(xs: list) -> float:
    return statistics.mean(xs)


@dagc.pipeline
def main(n: int = 5):
    xs  =  load(n)   # spaced as the user likes
    return mean(xs)
''', frozenset(), ("import dagc",), runs_as_before=False)

NO_PIPELINE = Case("DAGC003", '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.task
def total(xs: list) -> int:
    return sum(xs)


# the pipeline, not yet marked as one
def main(n: int = 4):
    return total(load(n))
''', frozenset(), ("@dagc.pipeline",))

KUBEFLOW = Case("DAGC107", '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.task(retries=1)  # flaky storage
def train(xs: list) -> float:
    return sum(xs) / len(xs)


@dagc.pipeline
def main(n: int = 5):
    xs = load(n)
    score = train(xs).set_cpu_limit("2").set_memory_limit("650M")
    return score
''', frozenset({9, 17}), ('@dagc.task(retries=1, cpus="2", memory="650M")  # flaky storage', "    score = train(xs)"),
    runs_as_before=False)

MISSPELT_OPTION = Case("DAGC120", '''\
import dagc


@dagc.task(cpu=1, cost="2s")
def square(x: int) -> int:
    return x * x


@dagc.pipeline
def main(x: int = 3):
    return square(x)
''', frozenset({4}), ('@dagc.task(cost="2s", cpus=1)',))

READONLY_CONTRADICTED = Case("DAGC155", '''\
import dagc


@dagc.task
def make(n: int) -> list:
    return list(range(n))


@dagc.task(readonly=["xs", "ys"])
def grow(xs: list, ys: list) -> int:
    xs.append(len(ys))
    return len(xs)


@dagc.pipeline
def main(n: int = 3):
    xs = make(n)
    grown = grow(xs, make(2))
    return grown, xs
''', frozenset({9}), ('@dagc.task(readonly=["ys"])',))

PURE_CONTRADICTED = Case("DAGC155", '''\
import dagc


@dagc.task
def make(n: int) -> list:
    return list(range(n))


@dagc.task(pure=True)
def shrink(xs: list) -> int:
    xs.pop()
    return len(xs)


@dagc.pipeline
def main(n: int = 3):
    xs = make(n)
    return shrink(xs), xs
''', frozenset({9}), ("@dagc.task",))

MAIN_SEED = Case("DAGC156", '''\
import random

import dagc


@dagc.task
def noisy(n: int) -> list:
    return [random.random() for _ in range(n)]


@dagc.task
def total(xs: list) -> float:
    return sum(xs)


@dagc.pipeline
def main(n: int = 4):
    return total(noisy(n))


if __name__ == "__main__":
    # the same numbers every run
    random.seed(3)
    print(main())
''', frozenset({22, 23}), ("# the same numbers every run", "random.seed(3)", "", ""),
    # (a module-level seed keeps the plain run's numbers by running the drawing task where the seed ran)
    left=frozenset({"DAGC150"}), runs_as_before=False)

NESTED_TASK = Case("DAGC108", '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4, scale: float = 2.0):
    xs = load(n)
    offset = 1

    # scales each item
    @dagc.task(retries=1)
    def rescale(v: list, *, rounded: bool = False) -> list:
        return [round(x * scale + offset) if rounded else x * scale + offset for x in v]

    return rescale(xs), rescale(xs, rounded=True)
''', frozenset({14, 15, 16, 17, 18, 19}),
    ("# scales each item", "@dagc.task(retries=1)", "def rescale(v: list, *, rounded: bool = False, offset, scale) -> list:",
     "    return [round(x * scale + offset) if rounded else x * scale + offset for x in v]", "", "",
     "    return rescale(xs, offset=offset, scale=scale), rescale(xs, rounded=True, offset=offset, scale=scale)"))

NESTED_HELPER = Case("DAGC108", '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4):
    def total(xs: list) -> int:  # a plain function: it runs as a task
        return sum(xs)

    return total(load(n))
''', frozenset({11, 12, 13}), ("def total(xs: list) -> int:  # a plain function: it runs as a task",
                                "    return sum(xs)", "", ""))

# called in a loop and under `if`; its comprehension's `x` is its own, not the `x` the pipeline binds later; it
# goes between the comment that ends `load` and the pipeline's own comment
NESTED_IN_A_LOOP = Case("DAGC108", '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))
# (the end of `load`)


# runs `shift` three times
@dagc.pipeline
def main(n: int = 3):
    @dagc.task
    def shift(ys: list) -> list:
        return [x + n + i for x in ys]

    outs = []
    for i in range(3):
        if i % 2 == 0:
            outs.append(shift(load(n)))
        else:
            outs.append(shift(load(i)))
    x = outs
    return x
''', frozenset({13, 14, 15, 16, 20, 22}),
    ("@dagc.task", "def shift(ys: list, i, n) -> list:", "    return [x + n + i for x in ys]", "", "",
     "            outs.append(shift(load(n), i=i, n=n))", "            outs.append(shift(load(i), i=i, n=n))"))

METHOD_WITHOUT_SELF = Case("DAGC133", '''\
import dagc


class Steps:
    @dagc.task
    def load() -> list:
        return [1, 2, 3]

    @dagc.task
    @staticmethod
    def total(xs: list) -> int:
        return sum(xs)


@dagc.pipeline
def main():
    return Steps.total(Steps.load())
''', frozenset(), ("    @staticmethod",))

NAME_SLIP = Case("DAGC101", '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(count: int = 4):
    xs = lod(count)  # a slip of a letter
    return xs, len(xs)
''', frozenset({11}), ("    xs = load(count)  # a slip of a letter",), runs_as_before=False)

CASES = {"missing-import": NO_IMPORT, "missing-pipeline": NO_PIPELINE, "kubeflow-resources": KUBEFLOW,
         "misspelt-option": MISSPELT_OPTION, "readonly-contradicted": READONLY_CONTRADICTED,
         "pure-contradicted": PURE_CONTRADICTED, "seed-in-main-block": MAIN_SEED, "nested-task": NESTED_TASK,
         "nested-helper": NESTED_HELPER, "nested-in-a-loop": NESTED_IN_A_LOOP,
         "method-without-self": METHOD_WITHOUT_SELF, "name-slip": NAME_SLIP}


def _codes(script: Path, *options: str) -> tuple[int, list[str]]:
    proc = run_dagc("check", str(script), "--diagnostics-format", "json", *options)
    return proc.returncode, [d["code"] for d in json.loads(proc.stdout)]


def _changes(before: str, after: str) -> tuple[set[int], list[str]]:
    """The lines of `before` that `after` does not keep byte for byte, and the lines `after` adds."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    changed: set[int] = set()
    added: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            changed.update(range(i1 + 1, i2 + 1))
        if tag in ("replace", "insert"):
            added.extend(after.splitlines()[j1:j2])
    return changed, added


def _fix_and_verify(script: Path, case: Case, tmp_path: Path, *options: str,
                    plain: Callable[[Path, str, Path], object] = plain_result) -> str:
    """Fix `script` (whose text is `case.source`) and check the fix as the module docstring says; `plain`: the
    fixed script's own run (a framework's, for a flow of another framework). Returns what `dagc fix` said."""
    status, before_codes = _codes(script, *options)
    assert case.code in before_codes, before_codes

    preview = run_dagc("fix", str(script), "--diff", *options)
    assert preview.returncode == 0, preview.stderr
    assert script.read_text(encoding="utf-8") == case.source, "--diff wrote the file"

    proc = run_dagc("fix", str(script), *options)
    assert proc.returncode == 0, proc.stderr
    assert f"fixed[{case.code}]" in proc.stderr
    fixed = script.read_text(encoding="utf-8")
    changed, added = _changes(case.source, fixed)
    assert changed == set(case.changed), fixed
    assert sorted(added) == sorted(case.added), fixed
    assert preview.stdout == "".join(difflib.unified_diff(
        case.source.splitlines(keepends=True), fixed.splitlines(keepends=True),
        fromfile=f"a/{script}", tofile=f"b/{script}"))

    status, after_codes = _codes(script)
    assert status == 0 and set(after_codes) == set(case.left), after_codes

    again = run_dagc("fix", str(script), *options)
    assert again.returncode == 0 and "0 fix(es) made; changed nothing" in again.stderr, again.stderr
    assert script.read_text(encoding="utf-8") == fixed

    local = run_local(script, case.pipeline, {}, tmp_path)
    assert local == plain(script, case.pipeline, tmp_path)
    if case.runs_as_before:
        written = tmp_path / "as_written"
        written.mkdir()
        (written / script.name).write_text(case.source, encoding="utf-8")
        assert local == plain(written / script.name, case.pipeline, written)
    return proc.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_makes_the_edit_the_diagnostic_names(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    script = tmp_path / "job.py"
    script.write_text(case.source, encoding="utf-8")
    _fix_and_verify(script, case, tmp_path)


READ_ONLY_IN_RUNS = Case("DAGC158", '''\
import dagc


class Scale:
    def __init__(self, k: float) -> None:
        self.k = k

    def __call__(self, xs: list) -> list:
        return [x * self.k for x in xs]


@dagc.task
def make(k: float) -> Scale:
    return Scale(k)


@dagc.task
def apply(scale, xs: list) -> list:
    fn = getattr(scale, "__call__")  # dagc cannot see what this calls
    return fn(xs)


@dagc.pipeline
def main():
    scale = make(2.0)
    return apply(scale, [1.0, 2.0]), apply(scale, [3.0])
''', frozenset({17}), ('@dagc.task(readonly=["scale"])',))


def test_fix_declares_readonly_what_no_run_changed(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(READ_ONLY_IN_RUNS.source, encoding="utf-8")
    program = tmp_path / "job_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    run_python([str(program), "--run-dir", str(tmp_path / "run")], check=True, timeout=120)
    _fix_and_verify(script, READ_ONLY_IN_RUNS, tmp_path, "--profile", str(tmp_path / "run"))
    assert compile_file(script).node("apply").options.readonly == ("scale",)


def test_fixes_follow_one_another_until_none_is_left(tmp_path: Path) -> None:
    """`import dagc` first: then the pipeline compiles far enough to show a misspelt option and the missing
    pipeline decorator, fixed in the next round."""
    script = tmp_path / "job.py"
    script.write_text(NO_IMPORT.source.replace("@dagc.task\ndef mean", "@dagc.task(retry=2)\ndef mean")
                      .replace("@dagc.pipeline\n", ""), encoding="utf-8")
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 0, proc.stderr
    assert [line.split("fixed[")[1][:7] for line in proc.stderr.splitlines() if "fixed[" in line] == \
        ["DAGC003", "DAGC120", "DAGC003"]
    fixed = script.read_text(encoding="utf-8")
    assert "import dagc\n" in fixed and "@dagc.task(retries=2)\n" in fixed and "@dagc.pipeline\ndef main" in fixed
    assert _codes(script) == (0, [])


def test_what_no_fix_covers_is_reported_and_left(tmp_path: Path) -> None:
    """A diagnostic without a fix is printed as `dagc check` prints it; with an error left, the status is 1 and
    the fixes that could be made are still written."""
    script = tmp_path / "job.py"
    script.write_text(MISSPELT_OPTION.source.replace("return square(x)", "return square(x, y=1)"),
                      encoding="utf-8")
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 1
    assert "error[DAGC103]" in proc.stderr and "1 diagnostic(s) left to fix by hand" in proc.stderr
    assert '@dagc.task(cost="2s", cpus=1)' in script.read_text(encoding="utf-8")
    preview = run_dagc("fix", str(script), "--diff")
    assert preview.returncode == 0 and preview.stdout == ""


NESTED_UNMOVABLE = {
    # moved to module level, it would take the place of the module's own `total`
    "shadows-a-module-name": '''\
import dagc


def total(xs: list) -> int:
    return len(xs)


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4):
    @dagc.task
    def total(xs: list) -> int:
        return sum(xs)

    return total(load(n))
''',
    # the pipeline defines another `f` further down: moved, the first call would find that one not yet made
    "defined-twice": '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4):
    @dagc.task
    def f(ys: list) -> list:
        return [2 * y for y in ys]

    xs = f(load(n))
    if n > 10:
        def f(ys: list) -> list:
            return ys
        xs = f(xs)
    return xs
''',
    # it reads the pipeline's `n`, and is called where `n` is the comprehension's own
    "called-where-its-name-is-another": '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4):
    @dagc.task
    def scale(xs: list) -> list:
        return [x * n for x in xs]

    xs = load(n)
    return [scale(xs) for n in (1, 2)]
''',
    # it reads `n` of the pipeline, and the pipeline passes it on as a value, not only calls it
    "passed-on-as-a-value": '''\
import dagc


@dagc.task
def apply(fn, xs: list) -> list:
    return [fn(x) for x in xs]


@dagc.pipeline
def main(n: int = 4):
    def shift(x: int) -> int:
        return x + n

    return apply(shift, [1, 2])
''',
}


@pytest.mark.parametrize("name", sorted(NESTED_UNMOVABLE))
def test_a_nested_function_that_cannot_move_exactly_keeps_its_hint(name: str, tmp_path: Path) -> None:
    """No fix where the move would change what the script computes: `dagc fix` changes nothing and reports the
    diagnostic at its place, with its hint."""
    script = tmp_path / "job.py"
    source = NESTED_UNMOVABLE[name]
    script.write_text(source, encoding="utf-8")
    line = next(i for i, text in enumerate(source.splitlines(), 1) if text.startswith("    def "))
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 1 and script.read_text(encoding="utf-8") == source
    assert f"{script}:{line}:5: error[DAGC108]" in proc.stderr and "= hint: move `def " in proc.stderr, proc.stderr
    assert "= fix:" not in proc.stderr and "0 fix(es) made; changed nothing; 1 diagnostic(s)" in proc.stderr


def test_a_nested_function_called_inside_another_that_rebinds_its_names_keeps_its_hint(tmp_path: Path) -> None:
    """`helper`'s call inside `shift` would pass `shift`'s own `n`, not the pipeline's: neither moves."""
    script = tmp_path / "job.py"
    source = '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4):
    def helper(x: int) -> int:
        return x * n

    @dagc.task
    def shift(ys: list) -> list:
        n = 10
        return [helper(y) + n for y in ys]

    return shift(load(n))
'''
    script.write_text(source, encoding="utf-8")
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 1 and script.read_text(encoding="utf-8") == source
    assert f"{script}:11:5: error[DAGC108]" in proc.stderr and f"{script}:15:5: error[DAGC108]" in proc.stderr
    assert "= fix:" not in proc.stderr and "0 fix(es) made; changed nothing; 2 diagnostic(s)" in proc.stderr


GUESSES = {
    # `np` is as close to `n` as difflib's hint goes, but no slip of a letter: the hint suggests, no fix writes
    "a-short-name-near-another": ("DAGC101", 12, 12, '''\
import dagc


@dagc.task
def load(n: int) -> list:
    return list(range(n))


@dagc.pipeline
def main(n: int = 4):
    xs = load(n)
    return np.mean(xs)
'''),
    # the main block runs the coroutine the DAG function's call gives: a plain `def` would give it no coroutine
    "an-async-dag-function-run-by-asyncio": ("DAGC108", 12, 1, '''\
import asyncio

from airflow.sdk import dag, task


@task
def plus_one(n: int) -> int:
    return n + 1


@dag(schedule=None)
async def main():
    return plus_one(3)


if __name__ == "__main__":
    print(asyncio.run(main()))
'''),
    # awaiting the stored coroutine where it is made would run its task before the other: a hint, not an edit
    "a-coroutine-awaited-after-other-work": ("DAGC108", 13, 5, '''\
import asyncio

from prefect import flow, task


@task
async def plus_one(n: int) -> int:
    return n + 1


@flow
async def main(n: int = 3):
    later = plus_one(n)
    now = await plus_one(n + 1)
    return now + await later


if __name__ == "__main__":
    print(asyncio.run(main()))
'''),
    # the same, the coroutine kept under a name first
    "an-async-dag-function-s-coroutine-kept-for-asyncio": ("DAGC108", 12, 1, '''\
import asyncio

from airflow.sdk import dag, task


@task
def plus_one(n: int) -> int:
    return n + 1


@dag(schedule=None)
async def main():
    return plus_one(3)


if __name__ == "__main__":
    pending = main()
    print(asyncio.run(pending))
'''),
}


@pytest.mark.parametrize("name", sorted(GUESSES))
def test_a_hint_that_is_no_exact_edit_is_reported_and_left(name: str, tmp_path: Path) -> None:
    code, line, col, source = GUESSES[name]
    script = tmp_path / "job.py"
    script.write_text(source, encoding="utf-8")
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 1 and script.read_text(encoding="utf-8") == source
    assert f"{script}:{line}:{col}: error[{code}]" in proc.stderr and "= hint: " in proc.stderr, proc.stderr
    assert "= fix:" not in proc.stderr and "0 fix(es) made" in proc.stderr


def test_fix_refuses_what_is_not_a_script(tmp_path: Path) -> None:
    graph = tmp_path / "g.ir.json"
    graph.write_text("{}", encoding="utf-8")
    proc = run_dagc("fix", str(graph))
    assert proc.returncode == 2 and "edits Python scripts" in proc.stderr and "Traceback" not in proc.stderr


def test_decorator_options_keep_the_call_s_layout() -> None:
    """Set and removed keywords keep a one-argument-a-line call in that form, and a call left without
    arguments becomes the bare decorator."""
    source = '@dagc.task(\n    cpus=1,\n    pure=True,\n)\ndef f(x):\n    return x\n'
    at = SourceSpan("f.py", 1, 2)
    applied = apply_edits(source, [SetOption(at, "pure", None), SetOption(at, "memory", '"2GiB"')])
    assert applied.text == '@dagc.task(\n    cpus=1,\n    memory="2GiB",\n)\ndef f(x):\n    return x\n'
    assert not applied.missed
    bare = apply_edits(applied.text, [SetOption(at, "cpus", None), SetOption(at, "memory", None)])
    assert bare.text == "@dagc.task\ndef f(x):\n    return x\n"
    moved = apply_edits(source, [SetOption(SourceSpan("f.py", 9, 2), "cpus", "2")])
    assert moved.text == source and len(moved.missed) == 1  # no decorator there: nothing guessed


def test_fix_edits_the_user_module_that_defines_the_task(tmp_path: Path) -> None:
    """A task imported from a module of the project is fixed in that module; the script stays as it was."""
    (tmp_path / "steps.py").write_text(PURE_CONTRADICTED.source.split("\n\n\n@dagc.pipeline")[0] + "\n",
                                       encoding="utf-8")
    script = tmp_path / "job.py"
    script.write_text("import dagc\nfrom steps import make, shrink\n\n\n@dagc.pipeline\ndef main(n: int = 3):\n"
                      "    xs = make(n)\n    return shrink(xs), xs\n", encoding="utf-8")
    before = script.read_text(encoding="utf-8")
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 0 and f"changed {tmp_path / 'steps.py'}" in proc.stderr, proc.stderr
    assert script.read_text(encoding="utf-8") == before
    assert "@dagc.task\ndef shrink" in (tmp_path / "steps.py").read_text(encoding="utf-8")
    assert _codes(script) == (0, [])


def test_fix_keeps_a_byte_order_mark(tmp_path: Path) -> None:
    """A script saved with a UTF-8 byte order mark is fixed, and written back with the mark, as it was."""
    script = tmp_path / "job.py"
    script.write_bytes(b"\xef\xbb\xbf" + MISSPELT_OPTION.source.encode("utf-8"))
    proc = run_dagc("fix", str(script))
    assert proc.returncode == 0, proc.stderr
    fixed = script.read_bytes()
    assert fixed.startswith(b"\xef\xbb\xbf") and not fixed[3:].startswith(b"\xef\xbb\xbf")
    assert b'@dagc.task(cost="2s", cpus=1)' in fixed
    plain = tmp_path / "plain.py"
    plain.write_text(MISSPELT_OPTION.source, encoding="utf-8")
    assert run_dagc("fix", str(plain)).returncode == 0
    assert plain.read_bytes() == fixed[3:]
