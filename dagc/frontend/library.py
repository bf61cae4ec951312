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
  * the tables below, for the standard library and a few common libraries: methods that only read their
    receiver, functions that act on the world or on files, and *output channels* (print, logging,
    warnings, progress bars, metric loggers), which are not state.
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
        self.copy_on_write: frozenset[str] = frozenset(data.get("copy_on_write", ()))

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


# ---- output channels: never state, never an order, never a reason not to cache --------------------------
_OUTPUT_FUNCTIONS = frozenset({"print", "builtins.print", "warnings.warn", "warnings.warn_explicit",
                               "pprint.pprint", "pprint.pp", "sys.stdout.write", "sys.stderr.write",
                               "sys.stdout.flush", "sys.stderr.flush", "wandb.log", "wandb.alert",
                               "tqdm.write", "tqdm.tqdm.write", "rich.print", "mlflow.set_tag", "mlflow.set_tags"})
_OUTPUT_PREFIXES = ("logging.", "mlflow.log_", "wandb.log", "neptune.log", "comet_ml.log")
_OUTPUT_CONSTRUCTORS = frozenset({"logging.getLogger", "logging.Logger", "logging.LoggerAdapter", "tqdm.tqdm",
                                  "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.trange", "tqdm.auto.trange",
                                  "torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter",
                                  "wandb.init", "rich.console.Console", "rich.progress.Progress"})
# Methods of an output channel (a logger, a progress bar, a metric writer): they print or log.
OUTPUT_METHODS = frozenset("""
debug info warning warn error exception critical log add_scalar add_scalars add_histogram add_image
add_text add_figure add_graph add_hparams set_description set_postfix set_description_str set_postfix_str
update refresh close flush write print log_metrics log_metric log_params log_param
""".split())

# Functions whose value differs from one call to the next on the same arguments (the clock, the process,
# a fresh UUID): no effect, but a task's output that depends on one is not what running it again gives.
_VARYING = frozenset({"time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
                      "time.monotonic_ns", "time.process_time", "time.process_time_ns", "time.thread_time",
                      "time.thread_time_ns", "time.localtime", "time.gmtime", "time.strftime", "time.ctime",
                      "time.asctime", "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
                      "datetime.date.today", "uuid.uuid1", "uuid.uuid4", "os.getpid", "os.getppid"})

# Reading the clock, sleeping, asking the process or host who it is: no effect on what a task computes.
_NO_EFFECT = _VARYING | frozenset({"time.sleep", "os.cpu_count", "os.getcwd", "os.getenv", "os.environ.get",
                                   "os.path.join", "os.path.basename", "os.path.dirname", "os.path.splitext",
                                   "os.path.abspath", "os.path.normpath", "os.fspath", "sys.getsizeof",
                                   "socket.gethostname", "platform.node", "platform.system",
                                   "sys.getrecursionlimit"})

# Values that cannot change once built: never state, whoever holds them.
_IMMUTABLE_CONSTRUCTORS = frozenset({"torch.device", "torch.dtype", "torch.Size", "torch.finfo", "torch.iinfo",
                                     "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "frozenset", "tuple",
                                     "str", "int", "float", "bool", "bytes", "complex", "range", "re.compile",
                                     "datetime.datetime", "datetime.date", "datetime.timedelta",
                                     "decimal.Decimal", "fractions.Fraction", "collections.namedtuple",
                                     "typing.NamedTuple", "os.getenv", "os.environ.get", "os.cpu_count",
                                     "os.path.join", "os.path.dirname", "os.path.abspath", "os.path.basename"})


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


# Methods known to leave their receiver unchanged (tensors, arrays, dicts, lists, strings, modules).
READ_METHODS = frozenset("""
mean sum std var max min argmax argmin abs item tolist numpy clone detach size dim numel view view_as
reshape flatten squeeze unsqueeze permute transpose t contiguous matmul mm bmm dot exp log sqrt pow
softmax log_softmax sigmoid tanh relu norm round floor ceil clamp eq ne lt le gt ge all any nonzero
get keys values items copy index count startswith endswith split join strip lstrip rstrip lower upper
format encode decode replace parameters named_parameters state_dict children modules named_modules
buffers named_buffers type_as new_zeros new_ones new_empty new_full new_tensor expand expand_as repeat
chunk unbind gather index_select masked_fill masked_select where argsort topk cumsum cumprod prod
median mode unique diff isnan isinf isfinite float_power add sub mul div neg reciprocal sign exp2
log2 log10 log1p sin cos tan cross outer kron trace diag triu tril flip roll narrow select take
to_dict to_numpy tobytes hex isdigit isalpha splitlines partition rpartition find rfind zfill
astype reshape_as squeeze_ numel is_contiguous is_floating_point element_size nbytes stride
data_ptr storage_offset __len__ __getitem__ __contains__ issubset issuperset union intersection
difference symmetric_difference isdisjoint most_common
""".split()) - {"squeeze_"}

# Methods that certainly change their receiver (checked against readonly=/pure= declarations).
KNOWN_MUTATORS = frozenset("append extend insert pop remove clear update setdefault popitem add discard sort "
                            "reverse zero_grad step load_state_dict train eval register_buffer "
                            "register_parameter apply requires_grad_".split())


# Methods of torch's modules, optimizers and tensors, and of common protocols, that change the object they
# are called on without a trailing `_` (numpy's, pandas', scikit-learn's and the generators' are in
# library_effects.json): no metadata lists them.
STATEFUL_METHODS = frozenset("backward add_param_group share_memory register_forward_hook register_backward_hook "
                             "register_full_backward_hook register_forward_pre_hook register_module add_module "
                             "compile reset reset_parameters set_epoch manual_seed seed set_state retain_grad "
                             "register_hook shuffle".split()) | frozenset(
    "to half float double bfloat16 cpu cuda type int long bool char short byte".split())  # in place on a module
# Methods that shuffle their first argument in place (`random.Random.shuffle`, numpy's `Generator.shuffle`).
SHUFFLES = frozenset({"shuffle"})

CONTAINER_METHODS = frozenset("append extend insert pop remove clear update setdefault popitem add discard "
                               "sort reverse".split())

# Conversions: a new tensor or array, but the same module converted in place.
CONVERSIONS = frozenset("to half float double bfloat16 cpu cuda type int long bool char short byte".split())


# Methods with no effect on anything but their result, that also never return an alias.
FRESH_METHODS = frozenset("item tolist numel size dim mean sum std var max min argmax argmin abs norm clone "
                           "count index startswith endswith isdigit isalpha find rfind".split())

# Attributes that are plain data (reading them never yields an alias of the object).
SCALAR_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "training",
                           "__name__", "__class__"})

# Builtins that neither change their arguments nor act on the world.
PURE_BUILTINS = frozenset("""
len sorted list tuple dict set frozenset sum min max zip enumerate isinstance issubclass str repr int
float bool round abs any all map filter range reversed format hash id type getattr hasattr iter
divmod pow chr ord bin hex oct callable vars dir slice complex bytes bytearray ascii super object property staticmethod classmethod NotImplemented
""".split())
FRESH_BUILTINS = frozenset("len sum min max isinstance issubclass str repr int float bool round abs any "
                            "all hash id callable divmod pow chr ord bin hex oct ascii".split())
WORLD_BUILTINS = frozenset({"open", "input", "exec", "eval", "exit", "quit", "breakpoint",
                             "setattr", "delattr", "__import__", "compile", "globals", "locals"})

# Library modules whose functions neither change their arguments nor act on the world, except where listed.
PURE_MODULES = ("math", "statistics", "json", "copy", "operator", "functools", "itertools", "string",
                 "re", "collections", "dataclasses", "typing", "numbers", "decimal", "fractions", "bisect",
                 "heapq", "hashlib", "base64", "textwrap", "pickle", "torch", "numpy", "np", "einops",
                 "os.path", "pathlib", "dagc", "time", "datetime", "uuid", "platform", "enum", "abc",
                 "contextlib", "types", "inspect", "argparse", "shlex", "fnmatch", "difflib", "zlib", "struct",
                 "array", "weakref", "pprint", "reprlib", "sklearn.metrics", "scipy")
IMPURE_FUNCTIONS = frozenset({
    "json.dump", "pickle.dump", "torch.save", "numpy.save", "numpy.savez", "numpy.savetxt",
    "torch.distributed", "torch.cuda",
    "torch.set_num_threads", "torch.set_default_dtype", "torch.use_deterministic_algorithms",
    "torch.set_grad_enabled", "torch.backends", "torch.hub", })
# Seeding the global generators is an effect on global state too (it changes what later draws give).
# (torch's own operators come from the catalogue; these are seeding functions and Python-level helpers)
RNG_FUNCTIONS = frozenset({
    "torch.manual_seed", "torch.seed", "torch.utils.data.random_split",
    "numpy.random.seed", "torch.cuda.manual_seed", "lightning.seed_everything", "transformers.set_seed",
    "pytorch_lightning.seed_everything", "torch.cuda.manual_seed_all", "torch.random.manual_seed",
})
SEEDING = frozenset({"torch.manual_seed", "random.seed", "numpy.random.seed", "torch.random.manual_seed",
                      "torch.cuda.manual_seed_all", "lightning.seed_everything", "pytorch_lightning.seed_everything",
                      "transformers.set_seed"})
RNG_PREFIXES = ("random.", "numpy.random.")
RNG_EXEMPT = frozenset({"random.Random", "random.SystemRandom", "numpy.random.default_rng",
                         "numpy.random.RandomState", "numpy.random.Generator", "numpy.random.PCG64",
                         "numpy.random.SeedSequence"})
WORLD_PREFIXES = ("os.", "shutil.", "subprocess.", "sys.", "socket.", "requests.", "urllib.", "http.",
                  "smtplib.", "builtins.", "boto3.", "multiprocessing.", "signal.", "ctypes.")
MUTATING_KWARGS = {"out", "inplace"}
# Functions and methods that read or write files (ordering among tasks: docs/ir.md "Effects and state").
FILE_READS = frozenset({
    "torch.load", "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "json.load",
    "pickle.load", "joblib.load", "os.listdir", "os.scandir", "os.walk", "os.stat", "os.path.exists", "os.path.isfile",
    "os.path.isdir", "os.path.getsize", "os.path.getmtime", "os.path.lexists", "glob.glob", "glob.iglob",
    "safetensors.torch.load_file", "yaml.safe_load", "yaml.load",
})
# Reads the run records (dagc.runtime.filetrace: opened files and listed directories) and checks before a stored
# output is reused: not an action on the world. (`os.stat`, `os.path.exists`: no record; they stay one.)
TRACED_READS = FILE_READS - {"os.stat", "os.path.exists", "os.path.isfile", "os.path.isdir", "os.path.getsize",
                             "os.path.getmtime", "os.path.lexists"}
FILE_WRITES = frozenset({
    "torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "json.dump",
    "pickle.dump", "joblib.dump", "os.remove", "os.unlink", "os.rename", "os.replace", "os.makedirs", "os.mkdir", "os.rmdir",
    "os.removedirs", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.utime", "tempfile.mkstemp",
    "safetensors.torch.save_file", "yaml.dump", "yaml.safe_dump",
})
FILE_PREFIXES_READ = ("pandas.read_", "pd.read_")
FILE_PREFIXES_WRITE = ("shutil.",)
FILE_READ_METHODS = frozenset({"read_text", "read_bytes", "iterdir", "rglob", "is_file", "is_dir", "exists",
                                "from_pretrained", "read_csv", "read_parquet", "read_json"})
FILE_WRITE_METHODS = frozenset({"write_text", "write_bytes", "mkdir", "unlink", "touch", "rmdir", "to_csv",
                                 "to_parquet", "to_json", "to_pickle", "savefig", "save", "save_pretrained",
                                 "write", "writelines", "dump", "to_file"})
# The argument naming the file, for the functions above that take one (others: the file is not known).
FILE_PATH_ARGUMENT = {
    "torch.save": 1, "torch.load": 0, "numpy.save": 0, "numpy.load": 0, "numpy.savez": 0,
    "numpy.savez_compressed": 0, "numpy.savetxt": 0, "numpy.loadtxt": 0, "numpy.genfromtxt": 0, "numpy.fromfile": 0,
    "json.dump": 1, "json.load": 0, "pickle.dump": 1, "pickle.load": 0, "joblib.dump": 1, "joblib.load": 0,
    "safetensors.torch.save_file": 1, "safetensors.torch.load_file": 0, "os.remove": 0, "os.unlink": 0,
    "os.makedirs": 0, "os.mkdir": 0, "os.listdir": 0, "os.path.exists": 0, "os.path.isfile": 0,
    "os.path.isdir": 0, "os.path.getsize": 0, "pandas.read_csv": 0, "pandas.read_parquet": 0, "pandas.read_json": 0,
    "shutil.rmtree": 0, "glob.glob": 0,
}
# Methods whose receiver is the path (`Path(p).write_text(...)`); other file methods take it first.
PATH_METHODS = frozenset({"write_text", "write_bytes", "read_text", "read_bytes", "mkdir", "unlink", "touch",
                          "rmdir", "iterdir", "rglob", "is_file", "is_dir", "exists", "open"})

# Library functions that return a view of an argument, or an object holding references to it.
ALIASING_FUNCTIONS = frozenset({
    "torch.reshape", "torch.squeeze", "torch.unsqueeze", "torch.flatten", "torch.narrow", "torch.select",
    "torch.t", "torch.transpose", "torch.permute", "torch.unbind", "torch.chunk", "torch.split",
    "torch.tensor_split", "torch.as_tensor", "torch.from_numpy", "torch.view_as_real", "torch.view_as_complex",
    "torch.movedim", "torch.swapaxes", "torch.diagonal", "torch.broadcast_to", "torch.atleast_1d",
    "torch.atleast_2d", "torch.detach", "torch.nn.init", "torch.utils", "torch.func",
    "torch.compile", "torch.jit", "numpy.asarray", "numpy.asanyarray", "numpy.reshape", "numpy.ravel",
    "numpy.squeeze", "numpy.transpose", "numpy.split", "numpy.array_split", "numpy.atleast_1d",
    "numpy.atleast_2d", "numpy.broadcast_to", "numpy.frombuffer", "numpy.lib",
})


