"""Command-line values that argparse cannot check itself, shared by the commands that take them."""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["UsageError", "parse_params"]


class UsageError(Exception):
    """A command-line mistake that argparse cannot see (reported like one, exit status 2)."""


def parse_params(items: list[str]) -> dict[str, Any]:
    """`--param NAME=VALUE` items: each VALUE a Python literal, else a string."""
    out: dict[str, Any] = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name.isidentifier():
            raise UsageError(f"--param {item!r}: write NAME=VALUE, e.g. --param n_shards=16")
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[name] = text
    return out
