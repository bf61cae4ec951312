"""README.md and docs/*.md show what users get: every marked command and example is run, and what it prints is
compared with what the page shows (the markers are described in tests/doctext.py)."""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagc.cli import build_parser, main
from tests.conftest import REPO
from tests.doctext import Block, bash_commands, blocks, commands, match_output, pages

DIAGNOSTICS = REPO / "docs" / "diagnostics.md"
MARKED = [p for p in pages(REPO) if p != DIAGNOSTICS and blocks(p.read_text(encoding="utf-8"))]
COMMAND_TIMEOUT_S = 300


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Exit status and output (standard output and error together) of one command run in `cwd`."""
    if argv[:2] == ["dagc", "run"]:  # its program prints to the process's own stdout: capture it there
        argv = ["python", "-m", "dagc.cli", *argv[1:]]
    if argv[0] == "dagc":  # in-process: the same code as the console script, without its start-up
        buffer = io.StringIO()
        previous = os.getcwd()
        os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                try:
                    status = main(argv[1:])
                except SystemExit as exc:  # argparse's --help and usage errors
                    status = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(previous)
        return status, buffer.getvalue()
    program = [sys.executable, *argv[1:]] if argv[0] == "python" else argv
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(program, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=COMMAND_TIMEOUT_S, check=False)
    return proc.returncode, proc.stdout


def _differs(where: str, argv: list[str], shown: list[str], printed: str) -> str:
    diff = difflib.unified_diff(shown, printed.rstrip().splitlines(), "shown on the page", "printed", lineterm="")
    return f"{where}: `{' '.join(argv)}` prints something else than the page shows:\n" + "\n".join(diff)


def _run_output_block(page: str, block: Block, cwd: Path) -> None:
    printed_by_shown: dict[tuple[str, ...], str] = {}
    for command in commands(block):
        _status, printed = _run(command.argv, cwd)
        where = f"{page}:{block.line}"
        matches = match_output(command.shown, printed, numbers=block.kind == "numbers")
        assert matches, _differs(where, command.argv, command.shown, printed)
        if block.kind == "numbers":  # the same output shown twice: the same figures printed twice
            earlier = printed_by_shown.setdefault(tuple(command.shown), printed)
            assert earlier == printed, f"{where}: `{' '.join(command.argv)}` printed {printed!r}, not {earlier!r}"


def _run_page_blocks(page: str, found: list[Block], cwd: Path) -> None:
    for block in found:
        if block.kind == "file":
            (cwd / block.name).parent.mkdir(parents=True, exist_ok=True)
            (cwd / block.name).write_text(block.body, encoding="utf-8")
        elif block.kind == "run":
            for argv in bash_commands(block):
                status, printed = _run(argv, cwd)
                assert status == 0, f"{page}:{block.line}: `{' '.join(argv)}` failed ({status}):\n{printed}"
        else:
            _run_output_block(page, block, cwd)


def _workdir(tmp_path: Path) -> Path:
    """A directory with the samples, as a fresh clone has them: the pages' commands run there."""
    shutil.copytree(REPO / "samples", tmp_path / "samples", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize("page", MARKED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_page_prints_what_it_shows(page: Path, tmp_path: Path) -> None:
    _run_page_blocks(page.relative_to(REPO).as_posix(), blocks(page.read_text(encoding="utf-8")), _workdir(tmp_path))


def test_the_pages_mark_what_users_run_first() -> None:
    """The commands a new user runs first are checked, not only shown."""
    readme = [c.argv for b in blocks((REPO / "README.md").read_text(encoding="utf-8"))
              if b.kind in ("output", "numbers") for c in commands(b)]
    for argv in (["dagc", "compile", "samples/quickstart.py", "-o", "out"], ["python", "out/quickstart_local.py"],
                 ["python", "samples/quickstart.py"], ["dagc", "ir", "samples/quickstart.py"],
                 ["dagc", "check", "bad.py"]):
        assert argv in readme, f"README.md does not mark `{' '.join(argv)}` for the docs test"
    for name in ("cli.md", "annotations.md", "pipeline_parallel.md"):
        assert REPO / "docs" / name in MARKED, f"docs/{name} marks nothing for the docs test"


# ---- docs/diagnostics.md: each example, put behind the prelude, gets its code from `dagc check` ----------------
_SECTION = re.compile(r"^### (DAGC\d{3}) — .+$", re.M)
_PYTHON = re.compile(r"```python\n(.*?)```", re.S)


def _diagnostic_sections() -> dict[str, str]:
    text = DIAGNOSTICS.read_text(encoding="utf-8")
    heads = list(_SECTION.finditer(text))
    return {m.group(1): text[m.end():heads[k + 1].start() if k + 1 < len(heads) else len(text)]
            for k, m in enumerate(heads)}


SECTIONS = _diagnostic_sections()
_TEXT = DIAGNOSTICS.read_text(encoding="utf-8")
PRELUDE = _PYTHON.search(_TEXT[:_TEXT.index("\n## ")]).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("code", sorted(c for c, s in SECTIONS.items()
                                         if _PYTHON.search(s) and "*Not from a script:*" not in s))
def test_diagnostic_example_gets_its_code(code: str, tmp_path: Path) -> None:
    section = SECTIONS[code]
    example = _PYTHON.search(section).group(1)  # type: ignore[union-attr]
    (tmp_path / "example.py").write_text(PRELUDE + "\n\n" + example, encoding="utf-8")
    shown = [b for b in blocks(section) if b.kind != "file"]
    if shown:  # the section says which command gets the code, and what it prints
        _run_page_blocks(f"docs/diagnostics.md {code}", shown, tmp_path)
        assert any(f"[{code}]" in line for b in shown for c in commands(b) for line in c.shown), \
            f"{code}: the commands shown do not report it"
        return
    _status, printed = _run(["dagc", "check", "example.py"], tmp_path)
    assert f"[{code}]" in printed, f"{code}: `dagc check example.py` of the example prints:\n{printed}"


# ---- docs/cli.md's synopsis: the options each command takes, as its --help shows them ----------------------------
def _subcommands() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")  # the subparsers
    return dict(action.choices)  # type: ignore[arg-type]


def test_dagc_command_lines_name_real_options() -> None:
    """Every `dagc COMMAND ...` line of a code block, and every such inline command, in README.md and docs/*.md
    (synopses, examples) names a command and options it takes; the arguments after `--` are in its usage."""
    parsers = _subcommands()
    global_options = {o for a in build_parser()._actions for o in a.option_strings}
    for page in pages(REPO):
        text = page.read_text(encoding="utf-8")
        spans = re.findall(r"(?<!`)`(dagc [^`\n]+)`(?!`)", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
        for block in [*re.findall(r"^```[\w-]*\n(.*?)^```", text, re.M | re.S), "\n".join(spans)]:
            for line in block.splitlines():
                found = re.match(r"(?:\$ )?dagc +([a-z|]+)\b(.*)", line)
                if found is None:
                    continue
                where = f"{page.relative_to(REPO)}: `{line.strip()}`"
                rest = found.group(2).split(" #")[0]
                for name in found.group(1).split("|"):
                    assert name in parsers, f"{where}: `dagc {name}` is no command"
                    sub = parsers[name]
                    options = global_options | {o for a in sub._actions for o in a.option_strings}  # type: ignore[attr-defined]
                    for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", rest.split(" -- ")[0]):
                        assert option.split("=")[0] in options, f"{where}: `dagc {name}` has no option {option}"
                    for tail in re.findall(r"\[-- [^\n]*\]$", rest):
                        assert tail in sub.format_usage(), f"`dagc {name} --help` lacks {tail}"  # type: ignore[attr-defined]


# ---- docs/runtime.md's event table: every event the runtime writes, and only those -----------------------------
def test_event_table_lists_every_event_written() -> None:
    text = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    section = text[text.index("## Event log"):]
    section = section[:section.index("\n## ", 1)]
    listed = set(re.findall(r"^\| `(\w+)`", section, re.M))
    written: set[str] = set()
    for source in (REPO / "dagc" / "runtime").rglob("*.py"):
        code = source.read_text(encoding="utf-8")
        written |= set(re.findall(r"(?:\.write|_event)\(\s*\"(\w+)\"", code))
    assert written, "no event found in dagc/runtime: the pattern above needs updating"
    assert listed == written, f"only written: {sorted(written - listed)}; only listed: {sorted(listed - written)}"


# ---- README's setup command: one command, pinned, that installs what README's own examples run ------------------
def test_readme_setup_installs_every_backend_its_examples_use() -> None:
    import tomllib

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Two commands"):readme.index("\n## ", readme.index("## Two commands") + 1)]
    setup, tests = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    assert "\n" not in setup and "pip install" in setup and "-c constraints.txt" in setup, setup
    extras = set(re.search(r'"\.\[([\w,]+)\]"', setup).group(1).split(","))  # type: ignore[union-attr]
    used = set(re.findall(r"--backend (ray|torch)\b", readme))
    assert used <= extras, f"README runs --backend {sorted(used - extras)} but its setup installs only {extras}"
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert extras <= set(declared["optional-dependencies"]), extras
    assert setup.endswith("&& dagc compile samples/quickstart.py -o out && python out/quickstart_local.py"), setup
    pinned = {line.split("==")[0].strip().lower() for line in (REPO / "constraints.txt").read_text().splitlines()
              if "==" in line}
    assert used <= pinned, f"constraints.txt does not pin {sorted(used - pinned)}"
    assert tests == 'python -m pip install -e ".[dev,torch,ray]" -c constraints.txt && python -m pytest'


# ---- the programs' synopses (docs/runtime.md, docs/ray_backend.md): the options each program's --help lists -------
_OPTION = r"(?<![\w-])(--[a-z][\w-]*)"


def _program_options(backend: str, cwd: Path) -> set[str]:
    program = f"program_{backend}.py"
    status, printed = _run(["dagc", "emit", str(REPO / "samples" / "quickstart.py"), "--backend", backend,
                            "--cluster", "2", "-o", program], cwd)
    assert status == 0, printed
    status, usage = _run(["python", program, "--help"], cwd)
    assert status == 0, usage
    return set(re.findall(_OPTION, usage.split("\noptions:")[0])) - {"--help"}


def _synopsis(page: str, program: str) -> set[str]:
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    found = re.search(rf"```\n(python {re.escape(program)} .*?)```", text, re.S)
    assert found is not None, f"docs/{page} has no synopsis of `python {program}`"
    return set(re.findall(_OPTION, found.group(1)))


def test_program_synopses_list_the_programs_options(tmp_path: Path) -> None:
    every = _program_options("local", tmp_path)  # the options every program takes
    documented = _synopsis("runtime.md", "PROGRAM.py")
    assert documented == every, f"only in docs/runtime.md: {sorted(documented - every)}; " \
                                f"only in the program: {sorted(every - documented)}"
    ray = _program_options("ray", tmp_path)
    assert every <= ray, f"the Ray program lacks {sorted(every - ray)}, which docs/runtime.md says every one takes"
    ray_only = ray - every
    documented = _synopsis("ray_backend.md", "quickstart_ray.py")
    assert documented == ray_only, f"only in docs/ray_backend.md: {sorted(documented - ray_only)}; " \
                                   f"only in the Ray program: {sorted(ray_only - documented)}"
