"""Bad input gets diagnostics with the right code and line, rendered with carets and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.diagnostics import render_text
from dagc.frontend import compile_source
from tests.conftest import run_dagc

HEADER = """
import dagc

@dagc.task
def load(path: str, n: int = 10) -> list:
    return [path] * n

@dagc.task(cost="2s")
def train(data: list, lr: float = 0.1) -> dict:
    return {"n": len(data), "lr": lr}

class Helper:  # a class: built inside a task, never in a pipeline body
    pass
"""

# (case, text appended to HEADER (which ends on line 12), expected code, expected line in the file)
CASES = [
    ("unknown keyword", "@dagc.pipeline\ndef p():\n    d = load('a')\n    return train(d, lrate=0.1)\n",
     "DAGC103", 16),
    ("missing argument", "@dagc.pipeline\ndef p():\n    return load()\n", "DAGC104", 15),
    ("too many positional", "@dagc.pipeline\ndef p():\n    return load('a', 1, 2)\n", "DAGC105", 15),
    ("argument twice", "@dagc.pipeline\ndef p():\n    return load('a', path='b')\n", "DAGC106", 15),
    ("undefined name", "@dagc.pipeline\ndef p():\n    return train(dataset)\n", "DAGC101", 15),
    ("used before produced", "@dagc.pipeline\ndef p():\n    m = train(d)\n    d = load('a')\n    return m\n",
     "DAGC102", 15),
    ("bad unit", "@dagc.task(memory='16 gigs')\ndef t2(x):\n    return x\n", "DAGC122", 13),
    ("bad duration", "@dagc.task(cost='2 fortnights')\ndef t2(x):\n    return x\n", "DAGC122", 13),
    ("wrong option type", "@dagc.task(gpus='two')\ndef t2(x):\n    return x\n", "DAGC121", 13),
    ("unknown option", "@dagc.task(gpu=1)\ndef t2(x):\n    return x\n", "DAGC120", 13),
    ("option not constant", "import os\n@dagc.task(cpus=os.cpu_count())\ndef t2(x):\n    return x\n",
     "DAGC123", 14),
    ("non-task call on task result", "@dagc.pipeline\ndef p():\n    d = load('a')\n    return Helper(d)\n",
     "DAGC107", 16),
    ("call of non-task", "@dagc.pipeline\ndef p():\n    x = Helper(3)\n    return load('a')\n", "DAGC111", 15),
    ("task outside pipeline", "data = load('x')\n", "DAGC110", 13),
    ("method call on task result", "@dagc.pipeline\ndef p():\n    d = load('a')\n    return train(d.copy())\n",
     "DAGC107", 16),
    ("lambda on task result", "@dagc.pipeline\ndef p():\n    d = load('a')\n    return train((lambda: d)())\n",
     "DAGC111", 16),
    ("try statement", "@dagc.pipeline\ndef p():\n    try:\n        d = load('a')\n    except Exception:\n"
     "        d = None\n    return d\n", "DAGC180", 17),
    ("global statement", "@dagc.pipeline\ndef p():\n    global G\n    return load('a')\n", "DAGC108", 15),
    ("mutating a task result", "@dagc.pipeline\ndef p():\n    d = load('a')\n    d[0] = 1\n    return d\n",
     "DAGC109", 16),
    ("recursive pipeline", "@dagc.pipeline\ndef p():\n    return q()\n@dagc.pipeline\ndef q():\n    return p()\n",
     "DAGC113", 18),
    ("unpacking mismatch", "@dagc.pipeline\ndef p():\n    a, b = (1, 2, 3)\n    return load('a')\n",
     "DAGC112", 15),
    ("positional task option", "@dagc.task(2)\ndef t2(x):\n    return x\n", "DAGC124", 13),
]


@pytest.mark.parametrize("name,body,code,line", CASES, ids=[c[0] for c in CASES])
def test_diagnostic_code_and_line(write_project, name: str, body: str, code: str, line: int) -> None:
    root = write_project({"bad.py": HEADER + body})
    result = compile_source(root / "bad.py", pipeline_name="p" if "def p()" in body else None)
    found = [(d.code, d.span.line if d.span else None) for d in result.sink.diagnostics if d.is_error]
    assert (code, line) in found, f"expected {code} at line {line}, got {found}"


def test_syntax_error_points_at_line(write_project) -> None:
    root = write_project({"bad.py": "import dagc\n\n@dagc.pipeline\ndef p(:\n    pass\n"})
    result = compile_source(root / "bad.py")
    [diag] = result.sink.diagnostics
    assert diag.code == "DAGC001" and diag.span is not None and diag.span.line == 4


def test_undecodable_bytes(write_project) -> None:
    root = write_project({"bad.py": b"import dagc\nx = '\xff\xfe'\n"})
    result = compile_source(root / "bad.py")
    [diag] = result.sink.diagnostics
    assert diag.code == "DAGC002" and diag.span is not None and diag.span.line == 2


def test_no_pipeline(write_project) -> None:
    root = write_project({"none.py": "import dagc\n\n@dagc.task\ndef t():\n    return 1\n"})
    result = compile_source(root / "none.py")
    assert [d.code for d in result.sink.diagnostics] == ["DAGC003"]


def test_every_error_in_a_file_is_reported(write_project) -> None:
    body = (
        "@dagc.pipeline\ndef p():\n"
        "    d = load('a', size=3)\n"  # line 15: DAGC103
        "    e = train(missing)\n"  # line 16: DAGC101
        "    f = Helper(e)\n"  # line 17: DAGC107 is suppressed: e failed already
        "    return train(load())\n"  # line 18: DAGC104
    )
    root = write_project({"bad.py": HEADER + body})
    result = compile_source(root / "bad.py")
    found = sorted((d.code, d.span.line) for d in result.sink.diagnostics if d.is_error and d.span)
    assert found == [("DAGC101", 16), ("DAGC103", 15), ("DAGC104", 18)]


def test_rendering_has_location_caret_and_hint(write_project) -> None:
    root = write_project({"bad.py": HEADER + "@dagc.pipeline\ndef p():\n    d = load('a')\n"
                          "    return train(d, lrate=0.1)\n"})
    result = compile_source(root / "bad.py")
    text = render_text(result.sink.sorted(), result.sources)
    lines = text.splitlines()
    assert lines[0].endswith("bad.py:16:21: error[DAGC103]: task `train` has no parameter `lrate`")
    assert lines[2] == "16 |     return train(d, lrate=0.1)"
    assert lines[3] == "   |                     ^^^^^^^^^"
    assert any(line.startswith("  = hint: did you mean `lr`?") for line in lines)
    assert any("`train` is defined here" in line for line in lines)


def test_cli_check_exit_status_and_json(write_project) -> None:
    root = write_project({"bad.py": HEADER + "@dagc.pipeline\ndef p():\n    return load()\n"})
    proc = run_dagc("check", str(root / "bad.py"))
    assert proc.returncode == 1
    assert "error[DAGC104]" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_dagc("check", str(root / "bad.py"), "--diagnostics-format", "json")
    assert proc.returncode == 1
    import json

    [diag] = json.loads(proc.stdout)  # on stdout: `dagc check --diagnostics-format json FILE | jq` works
    assert diag["code"] == "DAGC104" and diag["span"]["line"] == 15 and diag["hint"]


def test_cli_check_ok_sample() -> None:
    proc = run_dagc("check", "samples/quickstart.py")
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stderr


def test_missing_file_is_a_diagnostic(tmp_path: Path) -> None:
    proc = run_dagc("check", str(tmp_path / "nope.py"))
    assert proc.returncode == 1
    assert "DAGC002" in proc.stderr and "Traceback" not in proc.stderr
