"""Robustness: whatever the input, the frontend ends in diagnostics — never a traceback or a hang.

Inputs: random programs from hypothesmith (also wrapped in a pipeline body), mutations of the
samples (deleted lines, swapped names, truncated files, inserted undecodable bytes), empty files
and deep nesting. Seeded, so CI runs are reproducible; `benchmarks/fuzz_frontend.py` runs longer.
"""

from __future__ import annotations

import random
import re
import signal
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagc.frontend import compile_source
from dagc.ir import verify
from dagc.ir.parser import parse_graph
from dagc.ir.printer import print_graph
from tests.conftest import SAMPLES
from tests.property import examples

SECONDS_PER_INPUT = 20
SAMPLE_TEXTS = {p.name: p.read_bytes() for p in sorted(SAMPLES.glob("*.py"))}


class Hang(BaseException):
    pass


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"no result within {seconds}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check_input(data: bytes, directory: Path, name: str = "fuzzed.py") -> list[str]:
    """Compile `data` as a script; fail on an exception, a hang or an internal error. Returns codes."""
    path = directory / name
    path.write_bytes(data)
    with deadline(SECONDS_PER_INPUT):
        result = compile_source(path)
        codes = [d.code for d in result.sink.diagnostics]
        assert "DAGC900" not in codes, [d.hint for d in result.sink.diagnostics if d.code == "DAGC900"][0]
        if result.graph is not None and not result.sink.has_errors:
            assert verify(result.graph) == [], verify(result.graph)
            text = print_graph(result.graph)
            assert print_graph(parse_graph(text)) == text
    return codes


# ---- mutations -----------------------------------------------------------------------------------
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def delete_lines(src: bytes, rnd: random.Random) -> bytes:
    lines = src.split(b"\n")
    for _ in range(rnd.randint(1, 3)):
        if lines:
            del lines[rnd.randrange(len(lines))]
    return b"\n".join(lines)


def swap_names(src: bytes, rnd: random.Random) -> bytes:
    names = sorted(set(_IDENT.findall(src)))
    if len(names) < 2:
        return src
    a, b = rnd.sample(names, 2)
    return re.sub(rb"\b(%s|%s)\b" % (re.escape(a), re.escape(b)), lambda m: b if m.group() == a else a, src)


def truncate(src: bytes, rnd: random.Random) -> bytes:
    return src[: rnd.randrange(len(src) + 1)]


def undecodable(src: bytes, rnd: random.Random) -> bytes:
    at = rnd.randrange(len(src) + 1)
    return src[:at] + rnd.choice([b"\xff", b"\xc3\x28", b"\x00", b"\xed\xa0\x80"]) + src[at:]


def duplicate_lines(src: bytes, rnd: random.Random) -> bytes:
    lines = src.split(b"\n")
    at = rnd.randrange(len(lines))
    return b"\n".join(lines[: at + 1] + lines[at:])


def reindent(src: bytes, rnd: random.Random) -> bytes:
    lines = src.split(b"\n")
    at = rnd.randrange(len(lines))
    lines[at] = b"    " * rnd.randint(0, 3) + lines[at].lstrip()
    return b"\n".join(lines)


MUTATIONS = [delete_lines, swap_names, truncate, undecodable, duplicate_lines, reindent]


def mutants(seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    rnd = random.Random(seed)
    names = sorted(SAMPLE_TEXTS)
    for _ in range(count):
        sample = rnd.choice(names)
        data = SAMPLE_TEXTS[sample]
        steps = [rnd.choice(MUTATIONS) for _ in range(rnd.randint(1, 3))]
        for mutate in steps:
            data = mutate(data, rnd)
        yield f"{sample}:{'+'.join(m.__name__ for m in steps)}", data


def deep_inputs() -> dict[str, bytes]:
    head = "import dagc\n\n@dagc.task\ndef t(x=0):\n    return x\n\n@dagc.pipeline\ndef p():\n"
    ifs = "".join("    " * (i + 1) + f"if {i} < 99:\n" for i in range(95)) + "    " * 96 + "x = t(1)\n"
    fors = "".join("    " * (i + 1) + f"for i{i} in range(2):\n" for i in range(13)) + "    " * 14 + "t(1)\n"
    return {
        "empty": b"",
        "only-newlines": b"\n\n\n",
        "bom": b"\xef\xbb\xbf" + head.encode() + b"    return t()\n",
        "nested-parens": (head + "    return " + "(" * 190 + "t()" + ")" * 190 + "\n").encode(),
        "nested-lists": (head + "    return " + "[" * 190 + "t()" + "]" * 190 + "\n").encode(),
        "nested-calls": (head + "    return " + "t(" * 150 + ")" * 150 + "\n").encode(),
        "long-chain": (head + "    x = t()\n    return " + " + ".join(["x"] * 3000) + "\n").encode(),
        "deep-ifs": (head + ifs + "    return 1\n").encode(),
        "deep-dynamic-ifs": (head + "    x = t()\n" + ifs.replace("if ", "if x and ") + "    return x\n").encode(),
        "deep-loops": (head + fors + "    return 1\n").encode(),
        "huge-range": (head + "    for i in range(10**12):\n        t(i)\n    return 1\n").encode(),
        "huge-string": (head + "    return t('x' * 10**12)\n").encode(),
        "huge-pow": (head + "    return t(10**10**10)\n").encode(),
        "format-width": (head + "    return t(f'{1:>999999999}')\n").encode(),
        "while-true": (head + "    while True:\n        t()\n    return 1\n").encode(),
        "self-import": b"import fuzzed\nfrom fuzzed import *\nfrom . import x\nimport dagc\n"
                       b"@dagc.pipeline\ndef p():\n    return fuzzed.p()\n",
    }


# ---- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(deep_inputs()))
def test_edge_inputs(tmp_path: Path, name: str) -> None:
    codes = check_input(deep_inputs()[name], tmp_path)
    assert codes or name in ("deep-ifs", "deep-loops", "bom", "nested-parens", "nested-lists", "nested-calls",
                             "long-chain", "deep-dynamic-ifs"), name


def test_mutated_samples(tmp_path: Path) -> None:
    for label, data in mutants(seed=20240601, count=120):
        try:
            check_input(data, tmp_path)
        except BaseException as exc:
            raise AssertionError(f"mutant {label} failed: {exc!r}") from exc


def _python_source() -> st.SearchStrategy[str]:
    import hypothesmith

    return hypothesmith.from_grammar()


@settings(max_examples=examples(60), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(source=_python_source(), wrap=st.booleans())
def test_random_programs(source: str, wrap: bool) -> None:
    if wrap:  # also interpret it as a pipeline body
        source = "import dagc\n\n@dagc.pipeline\ndef p():\n" + textwrap.indent(source, "    ") + "\n    pass\n"
    with tempfile.TemporaryDirectory() as tmp:
        check_input(source.encode("utf-8", "surrogatepass"), Path(tmp))
