"""A task that runs another dagc script as a program of its own (`python other.py`), as a pipeline that drives
an evaluation script does: that script's pipeline runs there, as it does under the plain run."""

import subprocess
import sys
from pathlib import Path

import dagc


@dagc.task
def run_script(name: str) -> str:
    script = Path(__file__).with_name(name)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@dagc.pipeline
def main() -> str:
    return run_script("module_call.py")
