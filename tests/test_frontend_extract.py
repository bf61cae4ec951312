"""The frontend builds the right graph from source, following the user's imports, running nothing."""

from __future__ import annotations

from pathlib import Path

from dagc.frontend import compile_source
from dagc.ir.types import Const, Ref, Seq
from tests.conftest import SAMPLES


def _ok(path: Path, **kw):
    result = compile_source(path, **kw)
    errors = [d for d in result.sink.diagnostics if d.is_error]
    assert not errors, errors
    return result.graph


def test_quickstart_graph_shape() -> None:
    graph = _ok(SAMPLES / "quickstart.py")
    assert [n.name for n in graph] == ["make_data", "split", "standardize", "fourier_features", "concat",
                                       "train", "evaluate", "report"]
    assert graph.node("make_data").outputs == ("make_data#0", "make_data#1")
    assert graph.node("split").args == (Ref("make_data#0"), Ref("make_data#1"))
    # the two feature branches depend only on split: they can run in parallel
    assert graph.predecessors("standardize") == ["split"] == graph.predecessors("fourier_features")
    assert graph.predecessors("concat") == ["standardize", "fourier_features"]
    assert graph.node("train").kwargs == (("epochs", Ref("epochs")), ("lr", Ref("lr")))
    assert graph.node("train").options.cost == 20.0 and graph.node("train").options.retries == 1
    assert graph.node("train").options.memory == 2**30
    assert graph.node("make_data").kwargs == (("seed", Const(7)),)  # module constant folded
    assert graph.returns == Ref("report")
    assert [p.name for p in graph.params] == ["n", "epochs", "lr"]
    span = graph.node("train").span
    line = (SAMPLES / "quickstart.py").read_text().splitlines()[span.line - 1]
    assert span.file.endswith("quickstart.py") and line[span.col - 1:].startswith("train(features, data")


def test_params_override(write_project) -> None:
    root = write_project({"p.py": """
        import dagc

        @dagc.task
        def f(x: int) -> int:
            return x

        @dagc.pipeline
        def p(n: int = 3, name: str = "a"):
            return f(n)
    """})
    graph = _ok(root / "p.py", params={"n": 16})
    assert graph.param("n").value == Const(16) and graph.param("name").value == Const("a")


def test_imports_across_the_users_project(write_project) -> None:
    root = write_project({
        "proj/__init__.py": "",
        "proj/data.py": """
            import dagc as dg

            @dg.task(cost="1m", out_size="1GiB")
            def load(path: str) -> bytes:
                return b""
        """,
        "proj/models/__init__.py": "",
        "proj/models/train.py": """
            from dagc import task as step

            @step(gpus=1)
            def fit(data, epochs=1):
                return data
        """,
        "proj/main.py": """
            import dagc as dg
            from .data import load
            from . import data as d
            from .models import train as t
            from proj.models.train import fit

            @dg.pipeline
            def main():
                a = load("x")
                b = d.load("y")
                c = t.fit(a, epochs=2)
                return fit(b), c
        """,
    })
    graph = _ok(root / "proj" / "main.py")
    assert [(n.name, n.target) for n in graph] == [
        ("load", "proj.data:load"), ("load.1", "proj.data:load"),
        ("fit", "proj.models.train:fit"), ("fit.1", "proj.models.train:fit"),
    ]
    assert graph.node("load").options.out_size == 2**30 and graph.node("fit").options.gpus == 1
    assert graph.module == "proj.main"
    assert graph.modules == {"proj.data": "proj/data.py", "proj.main": "proj/main.py",
                             "proj.models.train": "proj/models/train.py"}
    assert graph.returns == Seq("tuple", (Ref("fit.1"), Ref("fit")))


def test_plain_import_alias_of_sibling_module(write_project) -> None:
    root = write_project({
        "steps.py": "import dagc\n\n@dagc.task\ndef prep(x):\n    return x\n",
        "run.py": "import dagc\nimport steps as s\n\n@dagc.pipeline\ndef p():\n    return s.prep(1)\n",
    })
    graph = _ok(root / "run.py")
    assert graph.node("prep").target == "steps:prep"


def test_nested_pipeline_is_inlined_with_hierarchical_names(write_project) -> None:
    root = write_project({"n.py": """
        import dagc

        @dagc.task
        def f(x):
            return x

        @dagc.pipeline
        def inner(x, k=2):
            return f(f(x))

        @dagc.pipeline
        def outer():
            a = inner(1)
            return inner(a, k=3)
    """})
    graph = _ok(root / "n.py", pipeline_name="outer")
    assert [n.name for n in graph] == ["inner.f", "inner.f.1", "inner.1.f", "inner.1.f.1"]
    assert graph.node("inner.1.f").args == (Ref("inner.f.1"),)
    assert graph.node("inner.f").attrs["frontend.scope"] == "inner"


def test_the_script_is_never_executed(write_project, tmp_path: Path) -> None:
    marker = tmp_path / "executed.txt"
    root = write_project({
        "pkg/__init__.py": f"open({str(marker)!r}, 'w').write('init ran')\nraise SystemExit('init ran')\n",
        "pkg/tasks.py": f"""
            import dagc
            open({str(marker)!r}, 'w').write('tasks ran')

            def make_default():
                open({str(marker)!r}, 'w').write('default ran')
                return 1

            @dagc.task(cost=str(open({str(marker)!r}, 'w')))
            def t(x=make_default()):
                return x
        """,
        "script.py": f"""
            import dagc
            from pkg.tasks import t
            open({str(marker)!r}, 'w').write('script ran')
            raise RuntimeError("the compiler must not run this")

            @dagc.pipeline
            def p():
                return t(1)
        """,
    })
    result = compile_source(root / "script.py")
    assert not marker.exists()
    # the decorator argument that is a call is reported, not evaluated
    assert [d.code for d in result.sink.diagnostics if d.is_error] == ["DAGC123"]


def test_decorated_function_still_runs_as_plain_python() -> None:
    import dagc

    @dagc.task(gpus=1, cost="2m")
    def double(x: int) -> int:
        return 2 * x

    @dagc.pipeline
    def pipe(x: int = 2) -> int:
        return double(double(x))

    assert pipe() == 8 and double.__name__ == "double"


def test_inlined_pipeline_is_drawn_as_a_cluster(write_project) -> None:
    from dagc.backends.graphviz import to_dot

    root = write_project({"n.py": """
        import dagc

        @dagc.task
        def f(x):
            return x

        @dagc.pipeline
        def prep(x):
            return f(f(x))

        @dagc.pipeline
        def outer():
            return f(prep(1))
    """})
    dot = to_dot(_ok(root / "n.py", pipeline_name="outer"))
    # Graphviz merges subgraphs of one name, so the cluster may be written in several blocks
    blocks = [part[: part.index("}")] for part in dot.split("subgraph cluster_pipeline_prep {")[1:]]
    cluster = "".join(blocks)
    assert blocks and "pipeline prep" in cluster
    assert '"task.prep.f"' in cluster and '"task.prep.f.1"' in cluster
    assert '"task.f"' not in cluster
