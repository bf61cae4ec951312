"""Start-up stays light: `dagc --help` and `dagc check` load none of the heavy libraries (networkx,
graphviz, torch, ray, numpy) nor tomllib when no TOML file is read. Times are measured in
benchmarks/startup.py, not here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO

HEAVY = ("networkx", "graphviz", "torch", "ray", "numpy", "tomllib")
PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    from dagc.cli import main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            status = main(sys.argv[1:])
        except SystemExit as exc:
            status = exc.code
    print(json.dumps({"status": status, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in %r)}))
""") % (HEAVY,)


SMALL = textwrap.dedent("""
    import dagc


    @dagc.task(cost="1s")
    def double(x: int) -> int:
        return 2 * x


    @dagc.pipeline
    def small(x: int = 2):
        return double(double(x))
""").lstrip()


def loaded_by(*args: str, cwd: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("args", [("--help",), ("check", "small.py"), ("plan", "--help")])
def test_commands_start_without_heavy_libraries(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "small.py").write_text(SMALL)
    result = loaded_by(*args, cwd=tmp_path)
    assert result["status"] == 0
    assert result["loaded"] == []


def test_graph_algorithms_without_networkx_match_it() -> None:
    """The adjacency that replaced networkx answers as networkx does on a real pipeline."""
    import networkx as nx

    from dagc.driver import compile_file

    graph = compile_file(str(REPO / "samples" / "quickstart.py"))
    reference = nx.DiGraph()
    reference.add_nodes_from(n.name for n in graph)
    reference.add_edges_from((a, b) for a, b in graph.edges() if a in graph)
    for node in graph:
        assert graph.ancestors(node.name) == nx.ancestors(reference, node.name)
        assert graph.descendants(node.name) == nx.descendants(reference, node.name)
        assert set(graph.successors(node.name)) == set(reference.successors(node.name))
    assert graph.reachability_pairs() == set(nx.transitive_closure_dag(reference).edges())
    assert graph.find_cycle() is None


def test_the_dagc_command_ends_at_once_without_losing_output(tmp_path: Path) -> None:
    """The installed `dagc` command (`console_main`) ends a compile-only command without freeing its objects;
    what it printed to a pipe (block-buffered), its exit status and the files it wrote are all kept."""
    import shutil

    (tmp_path / "small.py").write_text(SMALL)
    (tmp_path / "broken.py").write_text("import dagc\n\n\n@dagc.pipeline\ndef p():\n    return undefined_task(1)\n")
    command = shutil.which("dagc") or pytest.fail("the dagc command is not installed")

    def dagc(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([command, *args], capture_output=True, text=True, cwd=tmp_path, timeout=120)

    plan = dagc("plan", "small.py", "--json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["tasks"] == 2
    emitted = dagc("emit", "small.py", "--backend", "local", "-o", "prog.py")
    assert emitted.returncode == 0, emitted.stderr
    run = subprocess.run([sys.executable, "prog.py"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and "8" in run.stdout, run.stdout + run.stderr
    broken = dagc("check", "broken.py")
    assert broken.returncode == 1
    assert "broken.py:6:" in broken.stderr and "1 error" in broken.stderr
