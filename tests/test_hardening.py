"""A compiler that cannot be turned against its user: hostile directory and file names never become code
in an emitted program, constant folding has bounds, and a script whose name is not an identifier is
imported by path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from dagc.frontend import compile_source
from tests.interpreters import run_python
from tests.property import examples

PIPELINE = '''\
import dagc


@dagc.task
def inc(x: int) -> int:
    return x + 1


@dagc.task
def done(x: int) -> bool:
    return x > 2


@dagc.pipeline
def p():
    x = 0
    for i in range(4):
        x = inc(x)
        if done(x):
            break
    return [inc(x), inc(2)]
'''

# directory names a user may have, or an attacker may choose: quotes, a docstring's end, line breaks
# followed by code, backslashes, comment markers, non-ASCII
HOSTILE = st.text(alphabet=st.sampled_from(['"', "'", "\\", "\n", "\r", "#", " ", "x", "=", "(", ")", "é", "\t",
                                            ":", "`"]), min_size=1, max_size=12).filter(
    lambda s: s.strip(" .") and "/" not in s and s not in (".", ".."))


def _emit_all(script: Path) -> dict[str, str]:
    out = {}
    for backend in ("local", "ray", "torch"):
        graph = compile_file(script, cluster=parse_cluster_spec("2"), backend=backend,
                             passes="verify,dce,cse,spread,partition,schedule,comm,commcheck" if backend == "torch"
                             else None)
        out[backend] = emit(graph, backend, script.parent / f"p_{backend}.py")
    return out


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=HOSTILE)
def test_hostile_directory_names_never_become_code(tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    root = tmp_path_factory.mktemp("hostile")
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")
    benign = root / "plain"
    benign.mkdir(exist_ok=True)
    (benign / "pipe.py").write_text(PIPELINE, encoding="utf-8")
    expected = {backend: _shape(text) for backend, text in _emit_all(benign / "pipe.py").items()}
    for backend, text in _emit_all(script).items():
        tree = ast.parse(text)  # one module, no syntax error
        # whatever the name holds, it adds no statement: the program has the shape a plain name gives
        assert _shape(text) == expected[backend], backend
        docstring = ast.get_docstring(tree)
        assert docstring is not None and docstring.startswith("Pipeline `p`, compiled by dagc from"), backend


def _shape(text: str) -> list[str]:
    """Every statement of a program, by kind, in order (nested ones included)."""
    return [type(node).__name__ for node in ast.walk(ast.parse(text)) if isinstance(node, ast.stmt)]


def test_a_hostile_name_in_a_program_that_runs(tmp_path: Path) -> None:
    directory = tmp_path / 'ev"""il\n    import os; os.system("touch PWNED")\n'
    directory.mkdir()
    script = directory / "pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")
    program = directory / "p_local.py"
    program.write_text(emit(compile_file(script), "local", program))
    proc = run_python([str(program)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[4, 3]" and not (tmp_path / "PWNED").exists()


def test_a_script_named_like_no_module_is_imported_by_path(tmp_path: Path) -> None:
    script = tmp_path / "my-pipe.py"
    script.write_text(PIPELINE, encoding="utf-8")
    texts = _emit_all(script)
    assert "import my-pipe" not in texts["ray"]
    assert "importlib.import_module('my-pipe')" in texts["ray"]
    program = tmp_path / "p_local.py"
    program.write_text(texts["local"])
    proc = run_python([str(program)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[4, 3]", proc.stderr


BOMBS = {
    "power of a power": "X = 10**4096\nY = X**4096\n",
    "product": "Y = 10**3000 * 10**3000\n",
    "shift": "Y = 1 << 4000 << 4000 << 4000 << 4000\n",
    "hexadecimal": "Y = 0x" + "f" * 4000 + "\n",
    "string doublings": "S = 'x' * 1000\nY = S + S\n" + "Y = Y + Y\n" * 12,
    "list product": "Y = [0] * 10**9\n",
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_constant_bombs_are_diagnostics_not_hangs(tmp_path: Path, bomb: str) -> None:
    script = tmp_path / "bomb.py"
    script.write_text("import dagc\n\n" + BOMBS[bomb] + "\n\n@dagc.task\ndef f(x) -> int:\n    return 1\n\n\n"
                      "@dagc.pipeline\ndef p():\n    return f(Y)\n", encoding="utf-8")
    result = compile_source(script)  # (unbounded, the power of a power runs for minutes)
    assert not any(d.code == "DAGC900" for d in result.sink.diagnostics)
    from tests.conftest import run_dagc

    if not result.sink.has_errors:  # a value too large to fold is read where the task runs, as Python does
        from dagc.ir.core import MODULE_VALUE_ATTR

        assert [n.target for n in result.graph if n.attrs.get(MODULE_VALUE_ATTR)] == ["bomb:Y"]
    for command in ("check", "ir"):
        proc = run_dagc(command, str(script))
        assert proc.returncode == (1 if result.sink.has_errors else 0) and "Traceback" not in proc.stderr, \
            proc.stderr
