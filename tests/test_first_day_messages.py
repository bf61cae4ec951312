"""What a new user's first mistakes print: carets under the whole expression, one warning per cause,
the function a missing @dagc.pipeline belongs on, logging in a pipeline body, misspelt pass names."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dagc.backend_warnings import ignored_option_warnings
from dagc.diagnostics import Diagnostic, render_text
from dagc.frontend import compile_source
from dagc.passes.base import PassSpecError, parse_pipeline
from tests.effect_sources import HISTORY_TASKS


def compiled(tmp_path: Path, source: str) -> tuple[list[Diagnostic], dict[str, str], object]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source))
    result = compile_source(path)
    return result.sink.diagnostics, result.sources, result.graph


def carets_under(rendered: str, line_text: str) -> str:
    """The caret line printed under the first snippet line that shows `line_text`."""
    lines = rendered.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(line_text) and " | " in line)
    return lines[at + 1].split(" | ", 1)[1].strip()


def only(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def test_dagc150_note_underlines_the_whole_draw(tmp_path: Path) -> None:
    diagnostics, sources, _ = compiled(tmp_path, """
        import random
        import dagc

        @dagc.task
        def flip() -> int:
            return random.randint(0, 1)

        @dagc.pipeline
        def p():
            return flip(), flip()
    """)
    [warning] = only(diagnostics, "DAGC150")
    assert carets_under(render_text([warning], sources), "return random.randint(0, 1)") == "^" * len(
        "random.randint(0, 1)")


def test_dagc155_underlines_the_whole_change(tmp_path: Path) -> None:
    diagnostics, sources, _ = compiled(tmp_path, """
        import dagc

        @dagc.task
        def load(p: str) -> list:
            return [p]

        @dagc.task(readonly=["log"])
        def add(log: list, x: float) -> None:
            log.append(x)

        @dagc.pipeline
        def p():
            log = load("a")
            add(log, 0.5)
            return log
    """)
    [warning] = only(diagnostics, "DAGC155")
    assert (warning.span.end_col - warning.span.col) == len("log.append(x)")
    assert carets_under(render_text([warning], sources), "log.append(x)") == "^" * len("log.append(x)")


def test_dagc157_note_underlines_the_whole_change(tmp_path: Path) -> None:
    diagnostics, sources, _ = compiled(tmp_path, "import dagc\n" + HISTORY_TASKS + textwrap.dedent("""
        @dagc.pipeline
        def p():
            record(1)
            return count()
    """))
    [warning] = only(diagnostics, "DAGC157")
    assert carets_under(render_text([warning], sources), "HISTORY.append(x)") == "^" * len("HISTORY.append(x)")


def test_dagc160_once_per_call_site_and_option_with_the_count(tmp_path: Path) -> None:
    diagnostics, _, graph = compiled(tmp_path, """
        import dagc

        @dagc.task(gpus=1, memory="8GiB")
        def step(x: int) -> int:
            return x + 1

        @dagc.pipeline
        def p():
            x = 0
            for i in range(30):
                x = step(x)
            return step(x)
    """)
    assert graph is not None, render_text(diagnostics)
    warnings = ignored_option_warnings(graph, "local")
    by_line = sorted((w.span.line, w.message.split("`")[3]) for w in warnings)
    assert by_line == [(12, "gpus"), (12, "memory"), (13, "gpus"), (13, "memory")]
    in_loop = [w for w in warnings if w.span.line == 12]
    assert all("30 tasks at this call" in w.message and "`step[0]`" in w.message for w in in_loop)
    single = [w for w in warnings if w.span.line == 13]
    assert all("tasks at this call" not in w.message for w in single)


def test_missing_pipeline_decorator_points_at_the_function_calling_the_tasks(tmp_path: Path) -> None:
    diagnostics, sources, _ = compiled(tmp_path, """
        import dagc

        @dagc.task
        def load() -> int:
            return 1

        @dagc.task
        def train(x: int) -> int:
            return x + 1

        def helper() -> int:
            return 3

        def main():
            x = load()
            return train(x)
    """)
    [error] = only(diagnostics, "DAGC003")
    assert error.span.line == 15
    assert carets_under(render_text([error], sources), "def main():") == "^" * len("main")
    assert "decorate `main`" in error.hint and "@dagc.pipeline" in error.hint


@pytest.mark.parametrize("statement", ["logger.info('loaded %s', x)", "logging.warning('hi')",
                                       "logging.getLogger(__name__).info('x')"])
def test_logging_in_a_pipeline_body_says_what_to_do(tmp_path: Path, statement: str) -> None:
    diagnostics, _, _ = compiled(tmp_path, f"""
        import logging
        import dagc
        logger = logging.getLogger(__name__)

        @dagc.task
        def load() -> int:
            return 1

        @dagc.pipeline
        def p():
            x = load()
            {statement}
            return x
    """)
    [error] = [d for d in diagnostics if d.is_error]
    assert "logging in a pipeline body is not supported" in error.message
    assert "into a task" in error.hint and "print(" in error.hint
    assert "decorate" not in error.hint


def test_a_misspelt_pass_name_gets_a_suggestion() -> None:
    with pytest.raises(PassSpecError, match=r"unknown pass 'dse' \(did you mean 'dce'\?\)"):
        parse_pipeline("verify,dse")
    with pytest.raises(PassSpecError, match=r"has no option 'algoo' \(did you mean 'algo'\?\)"):
        parse_pipeline("partition{algoo=heft}")
    with pytest.raises(PassSpecError) as nothing_close:
        parse_pipeline("zzzz")
    assert "did you mean" not in str(nothing_close.value)
