"""A package whose `__init__.py` re-exports a task under its submodule's name."""

from steps import loader

import dagc


@dagc.pipeline
def main(n: int = 3) -> list:
    return loader(n)
