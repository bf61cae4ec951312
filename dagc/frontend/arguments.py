"""`argparse` in a pipeline body, read at compile time.

pytorch/examples parse their options where the pipeline starts:

    parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
    parser.add_argument("--epochs", type=int, default=14, metavar="N", help="...")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    for epoch in range(1, args.epochs + 1): ...

dagc builds the same parser from the literal arguments of these calls (no user code runs: `type=` may be
`int`, `float`, `str` or `bool`) and parses the script's arguments known at compile time (`dagc run SCRIPT
-- -- ARGS`, else none, as `python SCRIPT` gives none). `args.epochs` is then a compile-time value like a
pipeline parameter's; `args` passed whole to a task is an `argparse.Namespace` built where it runs.

The emitted program keeps the parser's description (`spec()`, the graph attribute `script.arguments`) and
parses the script's arguments it is given at run time with it (dagc.runtime.arguments): the arguments `python
SCRIPT` rejects are rejected with argparse's own message, and values other than the ones the program was
compiled for stop it with the command that compiles it for them.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
from typing import Any

from dagc.runtime.arguments import TYPES, ArgumentsError, build_parser

__all__ = ["SCRIPT_ARGS", "ArgumentsError", "StaticArgParser", "StaticArgs", "TYPES", "build_parser", "parsed"]

# the script's arguments at compile time (`dagc run SCRIPT -- -- ARGS`); none by default, as under `python SCRIPT`
SCRIPT_ARGS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("dagc_script_args", default=())
# the parsers whose parse_args() a compilation evaluated (the first one is the script's)
parsed: contextvars.ContextVar[list[StaticArgParser] | None] = contextvars.ContextVar("dagc_parsed", default=None)

_PARSER_OPTIONS = ("prog", "description", "epilog", "add_help", "allow_abbrev", "prefix_chars")
_ARGUMENT_OPTIONS = ("action", "nargs", "const", "default", "type", "choices", "required", "help", "metavar", "dest")
_ACTIONS = ("store", "store_true", "store_false", "store_const", "append", "count", "extend")
# what only changes the help text: accepted, not kept
_HELP_ONLY = ("formatter_class", "usage")


class StaticArgParser:
    """An `argparse.ArgumentParser` described by literals: its options and its `add_argument` calls."""

    def __init__(self, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - set(_PARSER_OPTIONS) - set(_HELP_ONLY))
        if unknown:
            raise ArgumentsError(f"ArgumentParser option {unknown[0]}= cannot be read at compile time")
        self.options = {k: v for k, v in options.items() if k in _PARSER_OPTIONS}
        self.arguments: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.defaults: dict[str, Any] = {}
        self.values: dict[str, Any] | None = None  # the compile-time parse
        self.given: tuple[str, ...] = ()

    def add_argument(self, names: tuple[Any, ...], options: dict[str, Any]) -> None:
        if not names or not all(isinstance(n, str) for n in names):
            raise ArgumentsError("add_argument takes the option strings (or the name) as literal strings")
        unknown = sorted(set(options) - set(_ARGUMENT_OPTIONS))
        if unknown:
            raise ArgumentsError(f"add_argument option {unknown[0]}= cannot be read at compile time")
        if "type" in options and options["type"] not in TYPES:
            raise ArgumentsError("add_argument's type= must be int, float, str or bool to be read at compile time")
        if options.get("action", "store") not in _ACTIONS:
            raise ArgumentsError(f"add_argument's action={options['action']!r} cannot be read at compile time")
        self.arguments.append((tuple(names), dict(options)))
        build_parser(self.spec())  # argparse's own checks (a conflicting option string, a bad nargs) now

    def set_defaults(self, options: dict[str, Any]) -> None:
        self.defaults.update(options)

    def parse_args(self, argv: list[str] | None) -> StaticArgs:
        given = tuple(SCRIPT_ARGS.get() if argv is None else argv)
        parser = build_parser(self.spec())
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                namespace = parser.parse_args(list(given))
            except SystemExit:
                message = err.getvalue().strip().splitlines()
                said = message[-1].partition("error: ")[2] if message else ""
                raise ArgumentsError(f"the script's arguments {list(given)!r} are rejected: "
                                     f"{said or 'see the usage'}") from None
        self.values = dict(sorted(vars(namespace).items()))
        self.given = given
        found = parsed.get()
        if found is not None and argv is None and self not in found:
            found.append(self)
        return StaticArgs(self, self.values)

    def spec(self) -> dict[str, Any]:
        """What rebuilds the parser where the program runs (literals only: JSON in the IR)."""
        out: dict[str, Any] = {"parser": dict(self.options),
                               "arguments": [[list(names), dict(options)] for names, options in self.arguments]}
        if self.defaults:
            out["defaults"] = dict(self.defaults)
        if self.values is not None:
            out["values"] = dict(self.values)
            out["given"] = list(self.given)
        return out


class StaticArgs:
    """What `parser.parse_args()` returned at compile time: `args.lr` is a constant."""

    def __init__(self, parser: StaticArgParser, values: dict[str, Any]) -> None:
        self.parser = parser
        self.values = values

    def static_attribute(self, name: str) -> Any:
        return self.values[name]

    def __repr__(self) -> str:
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in self.values.items())})"
