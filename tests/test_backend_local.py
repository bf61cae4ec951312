"""The local backend's program computes what calling the pipeline function computes."""

from __future__ import annotations

import pickle
from pathlib import Path

from dagc.backends import emit
from dagc.driver import compile_file
from tests.conftest import REPO, SAMPLES, run_dagc
from tests.interpreters import run_python
from tests.plain import plain_result as _plain_result  # (the name the other modules import)


def _ruff_clean(path: Path) -> None:
    proc = run_python(["-m", "ruff", "check", "--isolated", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_quickstart_local_equals_plain_run(tmp_path: Path) -> None:
    graph = compile_file(SAMPLES / "quickstart.py")
    program = tmp_path / "prog" / "quickstart_local.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    result_path = tmp_path / "local.pkl"
    run_python([str(program), "--result", str(result_path)], check=True, timeout=300)
    local = pickle.loads(result_path.read_bytes())
    plain = _plain_result(SAMPLES / "quickstart.py", "quickstart", tmp_path)
    assert local == plain
    assert local["accuracy"] > 0.7


def test_program_help_and_relocation(tmp_path: Path, write_project) -> None:
    root = write_project({
        "proj/__init__.py": "",
        "proj/steps.py": "import dagc\n\n@dagc.task\ndef inc(x: int) -> int:\n    return x + 1\n\n"
                         "@dagc.task\ndef pair(a, b):\n    return (a, b)\n",
        "proj/main.py": "import dagc\nfrom .steps import inc, pair\n\n@dagc.pipeline\ndef p(start: int = 1):\n"
                        "    a = inc(start)\n    b = inc(a)\n    return pair([a, b], {'k': b, 'c': 3})\n",
    })
    graph = compile_file(root / "proj" / "main.py", params={"start": 40})
    program = tmp_path / "elsewhere" / "p_local.py"
    program.parent.mkdir()
    program.write_text(emit(graph, "local", program))
    _ruff_clean(program)
    helped = run_python([str(program), "--help"], capture_output=True, text=True, check=True)
    assert "--result" in helped.stdout and "--source-root" in helped.stdout
    out = run_python([str(program)], capture_output=True, text=True, check=True,
                         cwd=tmp_path)
    assert out.stdout.strip() == "([41, 42], {'k': 42, 'c': 3})"


def test_cse_and_dce_change_what_runs(tmp_path: Path, write_project) -> None:
    root = write_project({"m.py": """
        import dagc

        CALLS = []

        @dagc.task(pure=True)
        def load(x):
            return x * 2

        @dagc.task(side_effects=True)
        def log(x):
            print("logged", x)

        @dagc.task
        def unused(x):
            raise RuntimeError("dce must remove this")  # no effects: only its (unused) result

        @dagc.pipeline
        def p():
            a = load(3)
            b = load(3)
            unused(a)
            log(b)
            return a, b
    """})
    graph = compile_file(root / "m.py")
    assert [n.name for n in graph] == ["load", "log"]
    program = tmp_path / "m_local.py"
    program.write_text(emit(graph, "local", program))
    out = run_python([str(program)], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["logged 6", "(6, 6)"]


def test_cli_compile_writes_every_artefact(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    proc = run_dagc("compile", "samples/quickstart.py", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    for name in ("quickstart.ir.json", "quickstart.ir.txt", "quickstart_local.py", "quickstart.dot",
                 "quickstart.svg"):
        assert (out / name).stat().st_size > 0, name
        assert name in proc.stdout
    assert (out / "quickstart.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    # the emitted program runs from its own directory
    run = run_python([str(out / "quickstart_local.py"), "--result", str(tmp_path / "r.pkl")],
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0
    # emit from the saved IR gives the same program as from the script
    again = run_dagc("emit", str(out / "quickstart.ir.json"), "--backend", "local", "-o",
                     str(out / "quickstart_local.py"))
    assert again.returncode == 0, again.stderr
    assert (out / "quickstart_local.py").read_text() == emit(compile_file("samples/quickstart.py"), "local",
                                                                 out / "quickstart_local.py")
