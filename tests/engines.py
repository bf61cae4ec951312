"""Running one pipeline of a script on each backend and reading its result: what the tests that compare a
backend with the plain run share (the plain run itself is tests.test_backend_local._plain_result)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from dagc.backends import emit
from dagc.cluster import parse_cluster_spec
from dagc.driver import compile_file
from tests.interpreters import run_python

__all__ = ["run_local", "run_ray", "run_torch", "each_form_equals"]


def each_form_equals(got: object, plain: dict[str, object], forms: list[str] | tuple[str, ...]) -> None:
    """`got`, the result of a pipeline that runs every form of a module and returns {form: its result}, equals
    the plain run's form by form; a failure names each form that differs, with both values."""
    assert isinstance(got, dict) and set(got) == set(plain) == set(forms), got
    wrong = {name: (got[name], plain[name]) for name in forms if got[name] != plain[name]}
    assert not wrong, f"forms that differ from the plain run (got, plain): {wrong}"


def run_local(script: Path, pipeline: str, params: dict[str, Any], tmp: Path, *args: str) -> object:
    """The local program's result, after checking that the program is lint-clean."""
    from tests.test_backend_local import _ruff_clean

    program = tmp / f"{pipeline.replace('.', '_')}_local.py"
    program.write_text(emit(compile_file(script, pipeline_name=pipeline, params=params), "local", program))
    _ruff_clean(program)
    run_python([str(program), "--result", str(tmp / "local.pkl"), *args], check=True,
                   timeout=120)
    return pickle.loads((tmp / "local.pkl").read_bytes())


def run_ray(script: Path, pipeline: str, params: dict[str, Any], tmp: Path, address: str, devices: int = 2,
            *args: str) -> object:
    """The Ray program's result on `devices` devices, on the cluster at `address` (`args`: more program
    options)."""
    graph = compile_file(script, pipeline_name=pipeline, params=params, cluster=parse_cluster_spec(str(devices)))
    program = tmp / f"{pipeline.replace('.', '_')}_ray.py"
    program.write_text(emit(graph, "ray", program))
    proc = run_python([str(program), "--address", address, "--result", str(tmp / "ray.pkl"),
                           "--run-dir", str(tmp / "ray-run"), *args], capture_output=True, text=True, timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return pickle.loads((tmp / "ray.pkl").read_bytes())


def run_torch(script: Path, pipeline: str, params: dict[str, Any], tmp: Path, *,
              split: tuple[str, str] | None = None, args: tuple[str, ...] = ()) -> object:
    """The torch program's result on 2 gloo ranks; `split=(a, b)` puts task b on the rank a is not on;
    `args`: more program options."""
    from tests.test_backend_torch import launch
    from tests.test_effects import _torch_program

    program = _torch_program(script, pipeline, params, tmp / f"{pipeline.replace('.', '_')}_torch.py", split=split)
    launch(program, 2, ["--result", str(tmp / "torch.pkl"), *args])
    return pickle.loads((tmp / "torch.pkl").read_bytes())
