"""Golden files for the sample's IR, DOT and emitted code, and byte-for-byte determinism."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.backends import emit
from dagc.backends.graphviz import to_dot
from dagc.driver import compile_file
from dagc.ir.printer import print_graph
from dagc.ir.serialize import dumps
from tests.conftest import REPO, run_dagc


@pytest.fixture
def quickstart(monkeypatch):
    monkeypatch.chdir(REPO)
    return compile_file("samples/quickstart.py")


def test_golden_ir_text(quickstart, golden) -> None:
    golden("quickstart.ir.txt", print_graph(quickstart))


def test_golden_ir_json(quickstart, golden) -> None:
    golden("quickstart.ir.json", dumps(quickstart))


def test_golden_dot(quickstart, golden) -> None:
    golden("quickstart.dot", to_dot(quickstart))


def test_golden_local_program(quickstart, golden) -> None:
    golden("quickstart_local.py.txt", emit(quickstart, "local", REPO / "out" / "quickstart_local.py"))


@pytest.mark.parametrize("command", [
    ("ir", "samples/quickstart.py"),
    ("ir", "samples/quickstart.py", "--format", "json"),
    ("emit", "samples/quickstart.py", "--backend", "local", "-o", "{tmp}/prog.py"),
    ("viz", "samples/quickstart.py", "-o", "{tmp}/g.dot"),
])
def test_output_is_identical_across_hash_seeds(tmp_path: Path, command: tuple[str, ...]) -> None:
    outputs = []
    for seed in ("0", "4242"):
        tmp = tmp_path / seed
        tmp.mkdir()
        args = [a.replace("{tmp}", str(tmp_path / "same")) for a in command]
        (tmp_path / "same").mkdir(exist_ok=True)
        proc = run_dagc(*args, env={"PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stderr
        files = sorted((tmp_path / "same").glob("*"))
        outputs.append((proc.stdout, [f.read_bytes() for f in files]))
    assert outputs[0] == outputs[1]
