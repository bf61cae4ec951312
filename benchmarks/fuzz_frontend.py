"""A longer fuzz of the frontend than CI's seeded test (tests/test_fuzz_frontend.py).

    python benchmarks/fuzz_frontend.py [--seconds 300] [--seed N]

Alternates mutated samples and hypothesmith programs until the time is up; every input must end in
diagnostics (no exception, no hang, no internal error). Failing inputs are written to
out/fuzz_failures/ and listed; the exit status is 1 when there are any.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.test_fuzz_frontend import check_input, deep_inputs, mutants  # noqa: E402


def _random_programs(seed: int):  # type: ignore[no-untyped-def]
    import hypothesmith
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    found: list[str] = []

    @settings(max_examples=50, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(source=hypothesmith.from_grammar(), wrap=st.booleans())
    def collect(source: str, wrap: bool) -> None:
        if wrap:
            source = "import dagc\n\n@dagc.pipeline\ndef p():\n" + textwrap.indent(source, "    ") + "\n    pass\n"
        found.append(source)

    import random

    random.seed(seed)
    collect()
    return found


def run(seconds: float, seed: int) -> int:
    warnings.filterwarnings("ignore", category=SyntaxWarning)  # hypothesmith compiles its programs
    failures: list[tuple[str, bytes, str]] = []
    count = 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        inputs = list(deep_inputs().items())
        round_ = 0
        while time.monotonic() - start < seconds:
            batch = inputs if round_ == 0 else []
            batch += list(mutants(seed + round_, 200))
            batch += [(f"hypothesmith#{round_}.{k}", s.encode("utf-8", "surrogatepass"))
                      for k, s in enumerate(_random_programs(seed + round_))]
            for label, data in batch:
                if time.monotonic() - start >= seconds:
                    break
                count += 1
                try:
                    check_input(data, directory)
                except BaseException as exc:  # noqa: BLE001 - every failure is reported
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    failures.append((label, data, repr(exc)[:300]))
            round_ += 1
    print(f"{count} inputs in {time.monotonic() - start:.0f}s, {len(failures)} failures")
    if failures:
        out = ROOT / "out" / "fuzz_failures"
        out.mkdir(parents=True, exist_ok=True)
        for k, (label, data, error) in enumerate(failures):
            (out / f"{k:04d}.py").write_bytes(data)
            print(f"  {out / f'{k:04d}.py'}  [{label}]  {error}")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(run(args.seconds, args.seed))
