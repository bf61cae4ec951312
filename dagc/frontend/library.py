"""All of dagc's effect knowledge, read by this one loader (docs/ir.md, "Effects and state").

Three data files, each read once (cached):
  * `torch_effects.json`, generated from torch's own metadata by `scripts/gen_effect_catalog.py`
    (operator schemas' write annotations, the `nondeterministic_seeded` tag, and the operators that
    `torch.nn.init`, `torch.nn.functional` and the `torch.nn` layers reach when run once): which argument a
    torch function or tensor method changes in place, which draw from the global generator, which layers
    draw their initial weights at random and which hold no state at all. The frontend reads the file; it
    never imports torch.
  * `library_effects.json`, generated from numpy's, pandas' and scikit-learn's own metadata by
    `scripts/gen_library_catalog.py` (ufuncs' and signatures' `out=`, pandas' `inplace=` parameters and file
    arguments, scikit-learn's estimators, their `fit*`/`set_*` methods and `random_state=None` defaults).
  * `effect_knowledge.json`, written by hand: what no library's metadata says (the standard library,
    output channels, files, the seeding functions, calls whose value varies, methods that only read their
    receiver, ...), one section per table, each with a `$doc`. Its `library_functions` and
    `receiver_methods` are merged over the generated numpy and pandas facts.
A library call none of them lists reads its arguments and returns a new value; the run-time check of
effects (dagc.runtime.effectcheck) is the backstop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dagc.ir.effects import is_immutable_type

__all__ = ["Knowledge", "knowledge", "Catalogue", "catalogue", "FunctionFacts", "LayerFacts", "is_output_function",
           "is_output_constructor", "is_immutable_constructor", "is_no_effect_function", "is_varying_function",
           "OUTPUT_METHODS", "SEEDING"]

_CATALOGUE = Path(__file__).with_name("torch_effects.json")  # generated
_LIBRARIES = Path(__file__).with_name("library_effects.json")  # generated
_KNOWLEDGE = Path(__file__).with_name("effect_knowledge.json")  # written by hand
_SECTION_KINDS = {"names": list, "prefixes": list, "positions": dict, "functions": dict, "methods": dict}


class Knowledge:
    """The hand-written file: sections of one kind each (`names`, `prefixes`, `positions`, `functions`,
    `methods`), checked when read, so that a misspelt section or kind fails at once rather than matching
    nothing."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._sections: dict[str, tuple[str, Any]] = {}
        for name, section in data.items():
            if name.startswith("$"):
                continue
            kinds = [k for k in section if k != "$doc"] if isinstance(section, dict) else []
            if len(kinds) != 1 or kinds[0] not in _SECTION_KINDS or not isinstance(section.get("$doc"), str) \
                    or not isinstance(section[kinds[0]], _SECTION_KINDS[kinds[0]]):
                raise ValueError(f"{_KNOWLEDGE.name}: section `{name}` needs a `$doc` and one of "
                                 f"{', '.join(_SECTION_KINDS)} (a list of names or prefixes, else an object)")
            self._sections[name] = (kinds[0], section[kinds[0]])

    def _section(self, name: str, kind: str) -> Any:
        found = self._sections.get(name)
        if found is None or found[0] != kind:
            raise KeyError(f"{_KNOWLEDGE.name} has no `{kind}` section `{name}`")
        return found[1]

    def names(self, section: str) -> frozenset[str]:
        """Names matched exactly."""
        return frozenset(self._section(section, "names"))

    def prefixes(self, section: str) -> tuple[str, ...]:
        """Name prefixes, for `str.startswith`."""
        return tuple(self._section(section, "prefixes"))

    def positions(self, section: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in self._section(section, "positions").items()}

    def functions(self, section: str) -> dict[str, dict[str, Any]]:
        return {str(k): dict(v) for k, v in self._section(section, "functions").items()}

    def methods(self, section: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._section(section, "methods").items()}


@lru_cache(maxsize=1)
def knowledge() -> Knowledge:
    return Knowledge(json.loads(_KNOWLEDGE.read_text(encoding="utf-8")))


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
    def add_libraries(self, data: dict[str, Any], known: Knowledge) -> None:
        self.library_versions: dict[str, str] = data.get("versions", {})
        self._library_functions: dict[str, dict[str, Any]] = {k: dict(v) for k, v in data.get("functions", {}).items()}
        self._library_classes: dict[str, dict[str, Any]] = data.get("classes", {})
        self._library_methods: dict[str, dict[str, Any]] = {k: dict(v) for k, v in data.get("methods", {}).items()}
        # what no signature says, written by hand: in-place functions, receiver-changing methods
        for name, facts in known.functions("library_functions").items():
            self._library_functions.setdefault(name, {}).update(facts)
        for name in known.methods("receiver_methods"):
            self._library_methods.setdefault(name, {})["self"] = True
        self._seeding = known.names("seeding_functions")
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
                            entry.get("rng_unless"), entry.get("reads_file"), name in self._seeding,
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
    found.add_libraries(json.loads(_LIBRARIES.read_text(encoding="utf-8")), knowledge())
    return found


# ---- the hand-written sections (effect_knowledge.json, where each says why), as typed constants -------------
_K = knowledge()
_OUTPUT_FUNCTIONS = _K.names("output_functions")
_OUTPUT_PREFIXES = _K.prefixes("output_prefixes")
_OUTPUT_PREFIX_EXCEPTIONS = _K.prefixes("output_prefix_exceptions")  # configure or build a channel
_OUTPUT_CONSTRUCTORS = _K.names("output_constructors")
OUTPUT_METHODS = _K.names("output_methods")  # methods of a logger, a progress bar, a metric writer
OUTPUT_STREAMS = _K.names("output_streams")  # `print(..., file=sys.stderr)` is output, not a file
LOG_METHODS = _K.names("log_methods")
WORLD_METHODS = _K.names("world_methods")
_VARYING = _K.names("varying")  # the clock, the process, a fresh UUID: another value on each call
_NO_EFFECT = _VARYING | _K.names("no_effect")
_IMMUTABLE_RESULTS = _K.names("immutable_results")


def is_output_function(name: str) -> bool:
    return name in _OUTPUT_FUNCTIONS or name.startswith(_OUTPUT_PREFIXES) and not name.startswith(
        _OUTPUT_PREFIX_EXCEPTIONS)


def is_output_constructor(name: str) -> bool:
    return name in _OUTPUT_CONSTRUCTORS


def is_immutable_constructor(name: str) -> bool:
    """A call whose result cannot change: a constructor of an immutable type (the IR's one predicate,
    dagc.ir.effects.is_immutable_type, on its qualified name) or a function listed as returning one."""
    return name in _IMMUTABLE_RESULTS or is_immutable_type(name)


def is_no_effect_function(name: str) -> bool:
    return name in _NO_EFFECT


def is_varying_function(name: str) -> bool:
    return name in _VARYING


READ_METHODS = _K.names("read_methods")  # leave their receiver unchanged
KNOWN_MUTATORS = _K.names("known_mutators")  # certainly change their receiver (checked against declarations)
STATEFUL_METHODS = _K.names("stateful_methods")  # change their receiver, with no trailing `_`
SHUFFLES = _K.names("shuffles")  # shuffle their first argument in place
CONTAINER_METHODS = _K.names("container_methods")
CONVERSIONS = _K.names("conversions")  # a new tensor or array, but the same module converted in place
RETURNS_SELF = _K.names("returns_self_methods")  # `model.to(device)` is `model`
FRESH_METHODS = _K.names("fresh_methods")  # no effect, and never return an alias
SCALAR_ATTRS = _K.names("scalar_attrs")  # plain data: reading them never yields an alias
PURE_BUILTINS = _K.names("pure_builtins")
FRESH_BUILTINS = _K.names("fresh_builtins")
WORLD_BUILTINS = _K.names("world_builtins")
PURE_MODULES = _K.prefixes("pure_modules")
IMPURE_FUNCTIONS = _K.names("impure_functions")
FRESH_RESULT_PREFIXES = _K.prefixes("fresh_result_prefixes")
DEEP_COPIES = _K.names("deep_copies")
# the one list of seeding functions: seeding is also an effect on the global generator
SEEDING = _K.names("seeding_functions")
RNG_FUNCTIONS = SEEDING | _K.names("draw_functions")
RNG_PREFIXES = _K.prefixes("rng_prefixes")
RNG_EXEMPT = _K.names("rng_exempt")
DATA_LOADERS = _K.names("data_loaders")
WORLD_PREFIXES = _K.prefixes("world_prefixes")
MUTATING_KWARGS = _K.names("mutating_kwargs")
STORING_METHODS = _K.names("storing_methods")  # store their arguments into their receiver
NATIVE_FILE_READERS = _K.prefixes("native_file_readers")  # open files where the audit hook cannot see them
FILE_READS = _K.names("file_reads")
# Reads the run records (dagc.runtime.filetrace: opened files and listed directories) and checks before a stored
# output is reused: not an action on the world. (`os.stat`, `os.path.exists`: no record; they stay one.)
TRACED_READS = FILE_READS - _K.names("untraced_file_checks")
FILE_WRITES = _K.names("file_writes")
FILE_PREFIXES_READ = _K.prefixes("file_prefixes_read")
FILE_PREFIXES_WRITE = _K.prefixes("file_prefixes_write")
FILE_READ_METHODS = _K.names("file_read_methods")
FILE_WRITE_METHODS = _K.names("file_write_methods")
FILE_PATH_ARGUMENT: dict[str, int] = _K.positions("file_path_argument")  # the argument naming the file
PATH_METHODS = _K.names("path_methods")  # their receiver is the path (`Path(p).write_text(...)`)
ALIASING_FUNCTIONS = _K.names("aliasing_functions")  # return a view of an argument, or hold references to it
DATA_ANNOTATION_WORDS = _K.names("data_annotation_words")  # a tensor, an array, a frame
DEVICE_TYPES = _K.names("device_types")  # `"cuda:0"` names a device
CONTAINER_CONSTRUCTORS = _K.names("container_constructors")  # a new container of the body's own
SHALLOW_COPIES = _K.names("shallow_copies")  # a new container holding the caller's items
ITERATION_WRAPPERS = _K.names("iteration_wrappers")  # `enumerate(loader)` iterates `loader`
