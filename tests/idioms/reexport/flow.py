"""A package whose `__init__.py` re-exports a task under its submodule's name."""

import dagc
from steps import loader


@dagc.pipeline
def main(n: int = 3) -> list:
    return loader(n)
