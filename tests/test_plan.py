"""The `plan` command implementation and the schedule-quality benchmark."""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path

import pytest

from dagc.cluster import parse_cluster_spec
from dagc.plan import add_plan_arguments, run_plan, run_plan_command

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("DAGC_DATA", ROOT / "benchmarks" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "stg").is_dir(), reason=f"benchmark data not found at {DATA}")


@needs_data
def test_plan_stg_json():
    files = [str(DATA / "stg" / "50" / f"rand000{i}.stg") for i in range(3)]
    out = io.StringIO()
    assert run_plan(files, parse_cluster_spec("4"), "dagc", True, out) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]  # JSON Lines
    assert [r["file"] for r in rows] == files
    for r in rows:
        assert r["tasks"] == 52 and r["devices"] == 4 and r["valid"] is True
        assert r["makespan"] >= r["lower_bound"] > 0 and r["seconds"] >= 0


@needs_data
def test_plan_text_table_and_wfcommons():
    out = io.StringIO()
    path = str(DATA / "wfcommons" / "helloworld-forkjoin-10-chameleon.json")
    assert run_plan([path], parse_cluster_spec("2x2"), "heft", False, out) == 0
    text = out.getvalue()
    assert "makespan" in text and "lower bound" in text and "utilization" in text and "cut bytes" in text


def test_plan_saved_ir_reports_defaults(tmp_path):
    from dagc.ir.core import Graph, Node
    from dagc.ir.location import SourceSpan
    from dagc.ir.serialize import dumps
    from dagc.ir.types import Ref, TaskOptions

    g = Graph("p", span=SourceSpan("p.py", 1, 1))
    g.add_node(Node("load", "task", "p:load", options=TaskOptions(cost=2.0), span=SourceSpan("p.py", 2, 1)))
    g.add_node(Node("train", "task", "p:train", args=(Ref("load"),), span=SourceSpan("p.py", 3, 1)))
    g.returns = Ref("train")
    path = tmp_path / "p.json"
    path.write_text(dumps(g))
    out = io.StringIO()
    assert run_plan([str(path)], parse_cluster_spec("2"), "dagc", False, out) == 0
    text = out.getvalue()
    assert "no cost or flops" in text and "train" in text and "no out_size" in text and "load" in text
    out = io.StringIO()
    run_plan([str(path)], parse_cluster_spec("2"), "dagc", True, out)
    assert json.loads(out.getvalue())["defaults"] == {"cost": ["train"], "out_size": ["load"]}


def test_plan_command_bad_cluster(capsys, tmp_path):
    parser = argparse.ArgumentParser()
    add_plan_arguments(parser)
    args = parser.parse_args([str(tmp_path / "x.stg"), "--cluster", "2y4"])
    assert run_plan_command(args) == 2
    assert "DAGC301" in capsys.readouterr().err


def test_plan_unknown_file_kind(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hello")
    out = io.StringIO()
    assert run_plan([str(path)], parse_cluster_spec("2"), "dagc", True, out) == 1
    assert json.loads(out.getvalue())["errors"][0]["code"] == "DAGC006"


@needs_data
def test_benchmark_quick():
    from benchmarks.schedule_quality import run

    text = run(quick=True)
    assert "## Schedule quality" in text and "| 4 |" in text and "10000" in text
