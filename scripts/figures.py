"""Regenerate the README's pictures (docs/img/) from the quickstart sample.

    python scripts/figures.py            # needs Graphviz's `dot`; uses torch when it is installed

1. docs/img/quickstart_2x2.png: `dagc viz samples/quickstart.py --cluster 2x2`, the partitioned graph.
2. docs/img/quickstart_timeline.png: the quickstart run on 2 ranks with the torch backend (the local
   backend when torch is missing): its measured timeline, bars coloured by the device the plan chose,
   above the schedule estimated from the annotations.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
SAMPLE = "samples/quickstart.py"


def dagc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "dagc.cli", "-q", *args], cwd=ROOT, check=True)


def main() -> int:
    IMG.mkdir(parents=True, exist_ok=True)
    dagc("viz", SAMPLE, "--cluster", "2x2", "-o", str(IMG / "quickstart_2x2.png"))
    backend = "torch" if importlib.util.find_spec("torch.distributed") else "local"
    with tempfile.TemporaryDirectory(prefix="dagc-figures-") as tmp:
        program, run_dir = Path(tmp) / f"quickstart_{backend}.py", Path(tmp) / "run"
        dagc("emit", SAMPLE, "--backend", backend, "--cluster", "2", "-o", str(program))
        subprocess.run([sys.executable, str(program), "--run-dir", str(run_dir)], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        dagc("timeline", SAMPLE, "--cluster", "2", "-p", "verify,dce,cse,partition,schedule,comm",
             "--run-dir", str(run_dir), "-o", str(IMG / "quickstart_timeline.png"))
    print(f"wrote {IMG / 'quickstart_2x2.png'} and {IMG / 'quickstart_timeline.png'} ({backend} run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
