"""Pipeline parameters that default to paths, as `pathlib` users write them."""

import pathlib
from pathlib import Path

import dagc


@dagc.task
def describe(p: Path) -> str:
    return f"{type(p).__name__} {p.name} in {p.parent}"


@dagc.pipeline
def checkpoint(where: pathlib.Path = pathlib.Path("models/best.pt")) -> str:
    return describe(where)


@dagc.pipeline
def main(root: Path = Path("data/train.csv")) -> list:
    return [describe(root), describe(root / "part-0"), checkpoint(), root]
