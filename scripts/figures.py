"""Regenerate the README's pictures (docs/img/) from the quickstart sample.

    python scripts/figures.py                  # both pictures; uses torch when it is installed
    python scripts/figures.py --only graph     # the partitioned graph alone (quick)
    python scripts/figures.py --out DIR        # write into DIR instead of docs/img

1. docs/img/quickstart_2x2.dot and quickstart_2x2.png: `dagc viz samples/quickstart.py --cluster 2x2`, the
   partitioned graph. The PNG is drawn by graphviz-pure, the Graphviz build pip installs with dagc, even where
   Graphviz's own `dot` is installed: every machine then draws the same bytes, and tests/test_figures.py
   checks that the committed files are what this script draws today.
2. docs/img/quickstart_timeline.png: the quickstart run on 2 ranks with the torch backend (the local backend
   when torch is missing): its measured timeline, bars coloured by the device the plan chose, above the
   schedule estimated from the annotations. A measurement: it differs from run to run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
SAMPLE = "samples/quickstart.py"
GRAPH = "quickstart_2x2"
TIMELINE = "quickstart_timeline.png"
PNG_DPI = 110  # the resolution `dagc viz` draws PNGs at


def dagc(command: str, *args: str) -> None:
    """`dagc COMMAND ...` in the repository, planned from the annotations (not from this machine's runs)."""
    subprocess.run([sys.executable, "-m", "dagc.cli", "-q", command, "--no-learned-costs", *args], cwd=ROOT,
                   check=True)


def graphviz_pure() -> str:
    """graphviz-pure's executable: on PATH, else beside this interpreter (a venv used without activating it)."""
    name = "graphviz-pure" + (".exe" if os.name == "nt" else "")
    for folder in (None, sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which(name, path=folder)
        if found:
            return found
    sys.exit("scripts/figures.py: graphviz-pure is not installed; reinstall dagc with pip, which brings it")


def draw_graph(out: Path) -> tuple[Path, Path]:
    """The partitioned graph as DOT and as PNG (drawn by graphviz-pure) in `out`."""
    dot, png = out / f"{GRAPH}.dot", out / f"{GRAPH}.png"
    dagc("viz", SAMPLE, "--cluster", "2x2", "-o", str(dot))
    source = dot.read_text(encoding="utf-8").replace("{", f"{{\n\tgraph [dpi={PNG_DPI}]", 1)
    proc = subprocess.run([graphviz_pure(), "-Kdot", "-Tpng"], input=source.encode("utf-8"), capture_output=True,
                          check=False)
    if proc.returncode != 0:
        sys.exit(f"scripts/figures.py: graphviz-pure failed: {proc.stderr.decode(errors='replace').strip()}")
    png.write_bytes(proc.stdout)
    return dot, png


def draw_timeline(out: Path) -> tuple[Path, str]:
    """A measured run of the quickstart above its estimated schedule, as PNG in `out`; and the backend run."""
    backend = "torch" if importlib.util.find_spec("torch.distributed") else "local"
    picture = out / TIMELINE
    with tempfile.TemporaryDirectory(prefix="dagc-figures-") as tmp:
        program, run_dir = Path(tmp) / f"quickstart_{backend}.py", Path(tmp) / "run"
        dagc("emit", SAMPLE, "--backend", backend, "--cluster", "2", "-o", str(program))
        subprocess.run([sys.executable, str(program), "--run-dir", str(run_dir)], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        dagc("timeline", SAMPLE, "--cluster", "2", "-p", "verify,dce,cse,partition,schedule,comm",
             "--run-dir", str(run_dir), "-o", str(picture))
    return picture, backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the README's pictures from the quickstart sample.")
    parser.add_argument("--only", choices=("graph", "timeline"), help="draw one of the two pictures")
    parser.add_argument("--out", type=Path, default=IMG, help="directory to write into (default: docs/img)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "graph"):
        dot, png = draw_graph(args.out)
        print(f"wrote {dot} and {png}")
    if args.only in (None, "timeline"):
        picture, backend = draw_timeline(args.out)
        print(f"wrote {picture} ({backend} run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
