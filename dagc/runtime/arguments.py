"""The script's own arguments in a program whose pipeline parses them (`parser.parse_args()` in its body).

The compiler read the parser and parsed the arguments it was given (dagc.frontend.arguments); the values
decided the pipeline (`range(1, args.epochs + 1)`) and are built into the program. When the program starts,
it parses the arguments after `--` with the same parser: what `python SCRIPT ARGS` would reject is rejected
with argparse's own message, and values other than the compiled ones stop the program with the command that
compiles it for them, instead of running the pipeline for the old ones.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TYPES", "ArgumentsError", "build_parser", "check_script_arguments"]

TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


class ArgumentsError(ValueError):
    """A use of argparse dagc cannot read at compile time, or arguments the parser rejects."""


def build_parser(spec: Mapping[str, Any], prog: str | None = None) -> argparse.ArgumentParser:
    """The parser `spec` (dagc.frontend.arguments.StaticArgParser.spec) describes."""
    options = dict(spec.get("parser", {}))
    if prog is not None:
        options.setdefault("prog", prog)
    parser = argparse.ArgumentParser(**options)
    for names, given in spec.get("arguments", []):
        kwargs = dict(given)
        if "type" in kwargs:
            kwargs["type"] = TYPES[kwargs["type"]]
        if isinstance(kwargs.get("choices"), list):
            kwargs["choices"] = tuple(kwargs["choices"])
        try:
            parser.add_argument(*names, **kwargs)
        except (ValueError, TypeError, argparse.ArgumentError) as exc:
            raise ArgumentsError(f"add_argument{tuple(names)!r}: {exc}") from None
    if spec.get("defaults"):
        parser.set_defaults(**spec["defaults"])
    return parser


def check_script_arguments(spec: Mapping[str, Any], argv: Sequence[str] | None, script: str) -> None:
    """Parse the script's arguments in the program's `argv` (those after `--`) as `python SCRIPT` would; exit (2)
    where they are rejected or differ from the values the program was compiled for."""
    from dagc.runtime.program import split_argv

    user_args = split_argv(argv)[1]
    parser = build_parser(spec, prog=script.rsplit("/", 1)[-1])
    values = vars(parser.parse_args(list(user_args)))  # argparse's own message and exit status 2
    compiled = dict(spec.get("values", {}))
    differ = [name for name in sorted(set(values) | set(compiled)) if _jsonish(values.get(name)) != compiled.get(name)]
    if not differ:
        return
    said = ", ".join(f"{name}={values.get(name)!r}" for name in differ)
    was = ", ".join(f"{name}={compiled.get(name)!r}" for name in differ)
    given = " ".join(shlex.quote(a) for a in spec.get("given", [])) or "none"
    again = " ".join(shlex.quote(a) for a in user_args)
    sys.stderr.write(
        f"error: the script's arguments give {said}, but this program was compiled for {was} (script "
        f"arguments: {given}); its pipeline was built from them. Compile it for these: "
        f"`dagc run {script} -- -- {again}`, or `dagc emit {script} --script-args=\"{again}\"`\n")
    raise SystemExit(2)


def _jsonish(value: object) -> object:
    """A parsed value as the IR keeps it (JSON: tuples are lists)."""
    if isinstance(value, tuple):
        return [_jsonish(v) for v in value]
    if isinstance(value, list):
        return [_jsonish(v) for v in value]
    return value
