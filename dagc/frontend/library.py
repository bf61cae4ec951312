"""What dagc knows about library code, for effect inference (docs/ir.md, "Effects and state").

Three sources, read by one loader (`catalogue()`):
  * `library_effects.json`, generated from numpy's, pandas' and scikit-learn's own metadata by
    `scripts/gen_library_catalog.py` (ufuncs' and signatures' `out=`, pandas' `inplace=` parameters and file
    arguments, scikit-learn's estimators, their `fit*`/`set_*` methods and `random_state=None` defaults).
    A library call the catalogues do not list reads its arguments and returns a new value; the run-time
    check of effects (dagc.runtime.effectcheck) is the backstop.
  * `torch_effects.json`, generated from torch's own metadata by `scripts/gen_effect_catalog.py`
    (operator schemas' write annotations, the `nondeterministic_seeded` tag, and the operators that
    `torch.nn.init`, `torch.nn.functional` and the `torch.nn` layers reach when run once): which argument a
    torch function or tensor method changes in place, which draw from the global generator, which layers
    draw their initial weights at random and which hold no state at all. The frontend reads the file; it
    never imports torch.
  * the hand-written tables, in `library_effects.json` too (written from `HAND_TABLES` in the same script),
    for the standard library and a few common libraries: methods that only read their receiver, functions
    that act on the world or on files, and *output channels* (print, logging, warnings, progress bars,
    metric loggers), which are not state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["Catalogue", "catalogue", "FunctionFacts", "LayerFacts", "is_output_function", "is_output_constructor",
           "is_immutable_constructor", "is_no_effect_function", "is_varying_function", "OUTPUT_METHODS"]

_CATALOGUE = Path(__file__).with_name("torch_effects.json")
_LIBRARIES = Path(__file__).with_name("library_effects.json")


@dataclass(frozen=True)
class FunctionFacts:
    """A library function: the positional arguments it changes in place, whether it writes `out=`,
    whether it draws from the global generator (unless given `generator=`)."""

    mutates: tuple[int, ...] = ()
    out: bool = False
    rng: bool = False


@dataclass(frozen=True)
class LayerFacts:
    """A `torch.nn` layer class: whether building it draws initial weights at random, whether calling it
    draws (dropout), and whether it holds no parameters or buffers (calling it changes nothing)."""

    init_rng: bool = False
    forward_rng: bool = False
    stateless: bool = False


class Catalogue:
    def __init__(self, data: dict[str, Any]) -> None:
        self.torch_version: str = data.get("torch", "")
        self._functions: dict[str, dict[str, Any]] = data.get("functions", {})
        self._methods: dict[str, dict[str, Any]] = data.get("tensor_methods", {})
        self._layers: dict[str, dict[str, Any]] = data.get("layers", {})
        self._classes: dict[str, dict[str, Any]] = data.get("classes", {})

    def function(self, name: str) -> FunctionFacts | None:
        """Facts about `torch.…` function `name` (fully qualified), or None if it changes nothing."""
        entry = self._functions.get(name)
        if entry is None:
            return None
        return FunctionFacts(tuple(entry.get("mutates", ())), bool(entry.get("out")), bool(entry.get("rng")))

    def method_draws(self, name: str) -> bool:
        """Whether tensor method `name` draws from the global generator (`x.uniform_()`, `x.bernoulli()`)."""
        entry = self._methods.get(name)
        return bool(entry and entry.get("rng"))

    def method_writes_self(self, name: str) -> bool:
        entry = self._methods.get(name)
        return bool(entry and entry.get("self"))

    def held_arguments(self, name: str) -> tuple[tuple[int, str], ...] | None:
        """For a torch class (an optimizer, a scheduler, a data loader): the constructor arguments, as
        (position, name), that the new object holds and may later change; None when not catalogued."""
        entry = self._classes.get(name)
        if entry is None:
            return None
        return tuple((int(i), str(n)) for i, n in entry.get("holds", ()))

    def layer(self, name: str) -> LayerFacts | None:
        entry = self._layers.get(name)
        if entry is None:
            return None
        return LayerFacts(bool(entry.get("init_rng")), bool(entry.get("forward_rng")), bool(entry.get("stateless")))

    # ---- numpy, pandas, scikit-learn (library_effects.json) ------------------------------------------
    def add_libraries(self, data: dict[str, Any]) -> None:
        self.library_versions: dict[str, str] = data.get("versions", {})
        self._library_functions: dict[str, dict[str, Any]] = data.get("functions", {})
        self._library_classes: dict[str, dict[str, Any]] = data.get("classes", {})
        self._library_methods: dict[str, dict[str, Any]] = data.get("methods", {})
        # libraries whose derived objects behave as copies (pandas 3's Copy-on-Write): results never alias inputs
        # (only where the installed pandas has it: before 3.0, a derived object may be a view that writes through)
        self.copy_on_write: frozenset[str] = frozenset(lib for lib in data.get("copy_on_write", ())
                                                       if (_major_version(lib) or 0) >= 3)

    def library_function(self, name: str) -> LibraryFacts | None:
        """What a numpy, pandas or scikit-learn function (or class) does besides returning a value; None:
        it reads its arguments and returns a new value."""
        entry = self._library_functions.get(name) or self._library_classes.get(name)
        if entry is None:
            return None
        return LibraryFacts(tuple(entry.get("mutates", ())), bool(entry.get("out")), bool(entry.get("rng")),
                            entry.get("rng_unless"), entry.get("reads_file"), bool(entry.get("seeds")),
                            bool(entry.get("estimator")), entry.get("rng_unless_false"),
                            bool(entry.get("rng_advances")), entry.get("rng_depends_if"))

    def method(self, name: str) -> MethodFacts | None:
        """What a method of that name does to its receiver in numpy, pandas or scikit-learn."""
        entry = self._library_methods.get(name)
        if entry is None:
            return None
        return MethodFacts(bool(entry.get("self")), bool(entry.get("inplace")),
                           entry.get("writes_file", entry.get("writes_file_if_given")),
                           "writes_file_if_given" in entry)


def _major_version(distribution: str) -> int | None:
    """The installed distribution's major version, from its metadata (never imported); None when absent."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version(distribution).split(".")[0])
    except (PackageNotFoundError, ValueError):
        return None


@dataclass(frozen=True)
class LibraryFacts:
    """A numpy, pandas or scikit-learn function or class: the positional arguments it changes in place,
    whether it writes `out=`, whether it draws from numpy's global generator (always, or unless given the
    keyword `rng_unless`), the argument naming the file it reads, whether it seeds, whether it is an
    estimator."""

    mutates: tuple[int, ...] = ()
    out: bool = False
    rng: bool = False
    rng_unless: str | None = None
    reads_file: int | None = None
    seeds: bool = False
    estimator: bool = False
    rng_unless_false: str | None = None  # draws nothing when this keyword is given False (`shuffle=False`)
    rng_advances: bool = False  # its draws advance the generator, but what it computes does not depend on them
    rng_depends_if: str | None = None  # ... unless this keyword is given a true value (`probability=True`)


@dataclass(frozen=True)
class MethodFacts:
    """A method name of numpy, pandas or scikit-learn objects: it changes its receiver (always, or with
    `inplace=True`), or writes the file its argument `writes_file` names (only when given one:
    `optional_file`)."""

    changes_self: bool = False
    inplace: bool = False
    writes_file: int | None = None
    optional_file: bool = False


@lru_cache(maxsize=1)
def catalogue() -> Catalogue:
    found = Catalogue(json.loads(_CATALOGUE.read_text(encoding="utf-8")))
    found.add_libraries(json.loads(_LIBRARIES.read_text(encoding="utf-8")))
    return found


# ---- the hand-written tables (library_effects.json's "tables", written by scripts/gen_library_catalog.py from
# its HAND_TABLES, where each says why): what no library's metadata says ---------------------------------------
def _tables() -> dict[str, Any]:
    return json.loads(_LIBRARIES.read_text(encoding="utf-8"))["tables"]


_T = _tables()


def _set(key: str) -> frozenset[str]:
    return frozenset(_T[key])


_OUTPUT_FUNCTIONS = _set("output_functions")
_OUTPUT_PREFIXES = tuple(_T["output_prefixes"])
_OUTPUT_CONSTRUCTORS = _set("output_constructors")
OUTPUT_METHODS = _set("output_methods")  # methods of a logger, a progress bar, a metric writer
_VARYING = _set("varying")  # the clock, the process, a fresh UUID: another value on each call
_NO_EFFECT = _VARYING | _set("no_effect")
_IMMUTABLE_CONSTRUCTORS = _set("immutable_constructors")


def is_output_function(name: str) -> bool:
    return name in _OUTPUT_FUNCTIONS or name.startswith(_OUTPUT_PREFIXES) and not name.startswith(
        ("logging.getLogger", "logging.basicConfig", "logging.Logger", "logging.Handler", "logging.Formatter",
         "logging.FileHandler", "logging.StreamHandler"))


def is_output_constructor(name: str) -> bool:
    return name in _OUTPUT_CONSTRUCTORS


def is_immutable_constructor(name: str) -> bool:
    return name in _IMMUTABLE_CONSTRUCTORS


def is_no_effect_function(name: str) -> bool:
    return name in _NO_EFFECT


def is_varying_function(name: str) -> bool:
    return name in _VARYING


READ_METHODS = _set("read_methods")  # leave their receiver unchanged
KNOWN_MUTATORS = _set("known_mutators")  # certainly change their receiver (checked against declarations)
STATEFUL_METHODS = _set("stateful_methods")  # change their receiver, with no trailing `_`
SHUFFLES = _set("shuffles")  # shuffle their first argument in place
CONTAINER_METHODS = _set("container_methods")
CONVERSIONS = _set("conversions")  # a new tensor or array, but the same module converted in place
FRESH_METHODS = _set("fresh_methods")  # no effect, and never return an alias
SCALAR_ATTRS = _set("scalar_attrs")  # plain data: reading them never yields an alias
PURE_BUILTINS = _set("pure_builtins")
FRESH_BUILTINS = _set("fresh_builtins")
WORLD_BUILTINS = _set("world_builtins")
PURE_MODULES = tuple(_T["pure_modules"])
IMPURE_FUNCTIONS = _set("impure_functions")
RNG_FUNCTIONS = _set("rng_functions")
SEEDING = _set("seeding")
SEED_CALLS = _set("seed_calls")  # as written, with common import aliases (dagc/frontend/seeds.py)
RNG_PREFIXES = tuple(_T["rng_prefixes"])
RNG_EXEMPT = _set("rng_exempt")
WORLD_PREFIXES = tuple(_T["world_prefixes"])
MUTATING_KWARGS = set(_T["mutating_kwargs"])
STORING_METHODS = _set("storing_methods")  # store their arguments into their receiver
NATIVE_FILE_READERS = tuple(_T["native_file_readers"])  # open files where the audit hook cannot see them
FILE_READS = _set("file_reads")
# Reads the run records (dagc.runtime.filetrace: opened files and listed directories) and checks before a stored
# output is reused: not an action on the world. (`os.stat`, `os.path.exists`: no record; they stay one.)
TRACED_READS = FILE_READS - {"os.stat", "os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.getsize",
                             "os.path.getmtime", "os.path.lexists"}
FILE_WRITES = _set("file_writes")
FILE_PREFIXES_READ = tuple(_T["file_prefixes_read"])
FILE_PREFIXES_WRITE = tuple(_T["file_prefixes_write"])
FILE_READ_METHODS = _set("file_read_methods")
FILE_WRITE_METHODS = _set("file_write_methods")
FILE_PATH_ARGUMENT: dict[str, int] = dict(_T["file_path_argument"])  # the argument naming the file
PATH_METHODS = _set("path_methods")  # their receiver is the path (`Path(p).write_text(...)`)
ALIASING_FUNCTIONS = _set("aliasing_functions")  # return a view of an argument, or hold references to it
