"""Generate dagc's catalogue of numpy, pandas and scikit-learn effects from the libraries' own metadata
(run at development time, beside scripts/gen_effect_catalog.py, which does the same for torch).

The frontend never imports these libraries; it reads `dagc/frontend/library_effects.json`, which this
script writes:

  python scripts/gen_library_catalog.py            # rewrite the catalogue for the installed libraries
  python scripts/gen_library_catalog.py --check    # exit 1 if the file differs from what they say

A library call reads its arguments and returns a new value unless the catalogue says otherwise. Where each
fact comes from:
  * numpy: every ufunc takes `out=`; a function whose signature has a parameter `out` writes it; the
    functions of `numpy.random` that are not constructors draw from the global generator; the functions
    and `ndarray` methods documented as changing an argument in place (numpy's reference says so, its
    signatures do not) are listed in HAND_WRITTEN below.
  * pandas: a method of `DataFrame`, `Series` or `Index` with an `inplace` parameter changes its receiver
    when given `inplace=True`; `read_*` functions read the file named by their first parameter and `to_*`
    methods whose first parameter is a path or buffer write it (the signatures say which); since pandas
    3.0 every derived object behaves as a copy (Copy-on-Write), so results never alias their inputs.
  * random generators: every public method of numpy's `Generator` and `RandomState` and of `random.Random`
    advances the generator it is called on.
  * scikit-learn: the estimators `sklearn.utils.all_estimators()` lists, under the public module that
    exports each; the estimator API's methods that change the estimator (`fit*`, `partial_fit`, `set_*`,
    found on the estimators); a function with a `random_state` parameter whose default is None draws from
    numpy's global generator unless it is given one, and so does an estimator with one whose fit, with its
    default options on small data, is seen to draw (LogisticRegression's default solver draws nothing; a
    random forest does); one whose predictions, fitted from two different global seeds, are the same only
    advances the generator (SVC: `rng_advances`); a function with a `shuffle=True` parameter draws nothing
    when given `shuffle=False`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import warnings
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "dagc" / "frontend" / "library_effects.json"

# What no signature says: the functions and methods numpy's and the standard library's references document as
# changing an argument in place (position of the argument), and the methods that change their receiver.
HAND_WRITTEN: dict[str, Any] = {
    "functions": {
        "numpy.copyto": {"mutates": [0]}, "numpy.put": {"mutates": [0]}, "numpy.place": {"mutates": [0]},
        "numpy.putmask": {"mutates": [0]}, "numpy.fill_diagonal": {"mutates": [0]},
        "numpy.put_along_axis": {"mutates": [0]}, "numpy.random.shuffle": {"mutates": [0], "rng": True},
        "numpy.random.seed": {"rng": True, "seeds": True},
        # the standard library's in-place algorithms on a list
        "heapq.heappush": {"mutates": [0]}, "heapq.heappop": {"mutates": [0]}, "heapq.heapify": {"mutates": [0]},
        "heapq.heapreplace": {"mutates": [0]}, "heapq.heappushpop": {"mutates": [0]},
        "bisect.insort": {"mutates": [0]}, "bisect.insort_left": {"mutates": [0]},
        "bisect.insort_right": {"mutates": [0]}, "random.shuffle": {"mutates": [0], "rng": True},
    },
    # receiver-changing methods of numpy's ndarray and of pandas objects without an `inplace` parameter
    "methods": {
        "fill": "numpy", "sort": "numpy", "partition": "numpy", "put": "numpy", "resize": "numpy",
        "setfield": "numpy", "setflags": "numpy", "itemset": "numpy",
        "pop": "pandas", "update": "pandas", "insert": "pandas", "__setitem__": "pandas", "__delitem__": "pandas",
    },
}
# The hand-written tables: what no library's metadata says (the standard library's builtins and modules,
# output channels, files, protocols). Written into library_effects.json beside the generated facts, so that
# dagc reads one data file with one loader (dagc/frontend/library.py); edit them here and run this script.
HAND_TABLES: dict[str, Any] = {
    # ---- output channels: never state, never an order, never a reason not to cache --------------------------
    "output_functions": ["builtins.print", "mlflow.set_tag", "mlflow.set_tags", "pprint.pp",
        "pprint.pprint", "print", "rich.print", "sys.stderr.flush", "sys.stderr.write",
        "sys.stdout.flush", "sys.stdout.write", "tqdm.tqdm.write", "tqdm.write", "wandb.alert",
        "wandb.log", "warnings.warn", "warnings.warn_explicit"],
    "output_prefixes": ["comet_ml.log", "logging.", "mlflow.log_", "neptune.log", "wandb.log"],
    "output_constructors": ["logging.Logger", "logging.LoggerAdapter", "logging.getLogger",
        "rich.console.Console", "rich.progress.Progress", "tensorboardX.SummaryWriter",
        "torch.utils.tensorboard.SummaryWriter", "tqdm.auto.tqdm", "tqdm.auto.trange",
        "tqdm.notebook.tqdm", "tqdm.tqdm", "tqdm.trange", "wandb.init"],
    # Methods of an output channel (a logger, a progress bar, a metric writer): they print or log.
    "output_methods": ["add_figure", "add_graph", "add_histogram", "add_hparams", "add_image",
        "add_scalar", "add_scalars", "add_text", "close", "critical", "debug", "error", "exception",
        "flush", "info", "log", "log_metric", "log_metrics", "log_param", "log_params", "print",
        "refresh", "set_description", "set_description_str", "set_postfix", "set_postfix_str",
        "update", "warn", "warning", "write"],
    # Functions whose value differs from one call to the next on the same arguments (the clock, the process,
    # a fresh UUID): no effect, but a task's output that depends on one is not what running it again gives.
    "varying": ["datetime.date.today", "datetime.datetime.now", "datetime.datetime.today",
        "datetime.datetime.utcnow", "os.getpid", "os.getppid", "time.asctime", "time.ctime",
        "time.gmtime", "time.localtime", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
        "time.perf_counter_ns", "time.process_time", "time.process_time_ns", "time.strftime",
        "time.thread_time", "time.thread_time_ns", "time.time", "time.time_ns", "uuid.uuid1",
        "uuid.uuid4"],
    # Values that cannot change once built: never state, whoever holds them.
    "immutable_constructors": ["bool", "bytes", "collections.namedtuple", "complex",
        "datetime.date", "datetime.datetime", "datetime.timedelta", "decimal.Decimal", "float",
        "fractions.Fraction", "frozenset", "int", "os.cpu_count", "os.environ.get", "os.getenv",
        "os.path.abspath", "os.path.basename", "os.path.dirname", "os.path.join", "pathlib.Path",
        "pathlib.PosixPath", "pathlib.PurePath", "range", "re.compile", "str", "torch.Size",
        "torch.device", "torch.dtype", "torch.finfo", "torch.iinfo", "tuple", "typing.NamedTuple"],
    # Methods known to leave their receiver unchanged (tensors, arrays, dicts, lists, strings, modules).
    "read_methods": ["__contains__", "__getitem__", "__len__", "abs", "add", "all", "any", "argmax",
        "argmin", "argsort", "astype", "bmm", "buffers", "ceil", "children", "chunk", "clamp",
        "clone", "contiguous", "copy", "cos", "count", "cross", "cumprod", "cumsum", "data_ptr",
        "decode", "detach", "diag", "diff", "difference", "dim", "div", "dot", "element_size",
        "encode", "endswith", "eq", "exp", "exp2", "expand", "expand_as", "find", "flatten", "flip",
        "float_power", "floor", "format", "gather", "ge", "get", "gt", "hex", "index",
        "index_select", "intersection", "is_contiguous", "is_floating_point", "isalpha", "isdigit",
        "isdisjoint", "isfinite", "isinf", "isnan", "issubset", "issuperset", "item", "items",
        "join", "keys", "kron", "le", "log", "log10", "log1p", "log2", "log_softmax", "lower",
        "lstrip", "lt", "masked_fill", "masked_select", "matmul", "max", "mean", "median", "min",
        "mm", "mode", "modules", "most_common", "mul", "named_buffers", "named_modules",
        "named_parameters", "narrow", "nbytes", "ne", "neg", "new_empty", "new_full", "new_ones",
        "new_tensor", "new_zeros", "nonzero", "norm", "numel", "numpy", "outer", "parameters",
        "partition", "permute", "pow", "prod", "reciprocal", "relu", "repeat", "replace", "reshape",
        "reshape_as", "rfind", "roll", "round", "rpartition", "rstrip", "select", "sigmoid", "sign",
        "sin", "size", "softmax", "split", "splitlines", "sqrt", "squeeze", "startswith",
        "state_dict", "std", "storage_offset", "stride", "strip", "sub", "sum",
        "symmetric_difference", "t", "take", "tan", "tanh", "to_dict", "to_numpy", "tobytes",
        "tolist", "topk", "trace", "transpose", "tril", "triu", "type_as", "unbind", "union",
        "unique", "unsqueeze", "upper", "values", "var", "view", "view_as", "where", "zfill"],
    # Methods that certainly change their receiver (checked against readonly=/pure= declarations).
    "known_mutators": ["add", "append", "apply", "clear", "discard", "eval", "extend", "insert",
        "load_state_dict", "pop", "popitem", "register_buffer", "register_parameter", "remove",
        "requires_grad_", "reverse", "setdefault", "sort", "step", "train", "update", "zero_grad",
        # (collections.deque, OrderedDict, set, queue.Queue, and the dunders called by name)
        "appendleft", "extendleft", "rotate", "move_to_end", "difference_update", "intersection_update",
        "symmetric_difference_update", "put_nowait", "__iadd__", "__setitem__", "__delitem__"],
    # Methods of torch's modules, optimizers and tensors, and of common protocols, that change the object they
    # are called on without a trailing `_` (numpy's, pandas', scikit-learn's and the generators' are in
    # library_effects.json): no metadata lists them.
    "stateful_methods": ["add_module", "add_param_group", "backward", "bfloat16", "bool", "byte",
        "char", "compile", "cpu", "cuda", "double", "float", "half", "int", "long", "manual_seed",
        "register_backward_hook", "register_forward_hook", "register_forward_pre_hook",
        "register_full_backward_hook", "register_hook", "register_module", "reset",
        "reset_parameters", "retain_grad", "seed", "set_epoch", "set_state", "share_memory",
        "short", "shuffle", "to", "type"],
    # Methods that shuffle their first argument in place (`random.Random.shuffle`, numpy's `Generator.shuffle`).
    "shuffles": ["shuffle"],
    "container_methods": ["add", "append", "clear", "discard", "extend", "insert", "pop", "popitem",
        "remove", "reverse", "setdefault", "sort", "update"],
    # Conversions: a new tensor or array, but the same module converted in place.
    "conversions": ["bfloat16", "bool", "byte", "char", "cpu", "cuda", "double", "float", "half",
        "int", "long", "short", "to", "type"],
    # Methods with no effect on anything but their result, that also never return an alias.
    "fresh_methods": ["abs", "argmax", "argmin", "clone", "count", "dim", "endswith", "find",
        "index", "isalpha", "isdigit", "item", "max", "mean", "min", "norm", "numel", "rfind",
        "size", "startswith", "std", "sum", "tolist", "var"],
    # Attributes that are plain data (reading them never yields an alias of the object).
    "scalar_attrs": ["__class__", "__name__", "device", "dtype", "is_cuda", "ndim", "requires_grad",
        "shape", "training"],
    # Builtins that neither change their arguments nor act on the world.
    "pure_builtins": ["NotImplemented", "abs", "all", "any", "ascii", "bin", "bool", "bytearray",
        "bytes", "callable", "chr", "classmethod", "complex", "dict", "dir", "divmod", "enumerate",
        "filter", "float", "format", "frozenset", "getattr", "hasattr", "hash", "hex", "id", "int",
        "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "object", "oct",
        "ord", "pow", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted",
        "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip"],
    "fresh_builtins": ["abs", "all", "any", "ascii", "bin", "bool", "callable", "chr", "divmod",
        "float", "hash", "hex", "id", "int", "isinstance", "issubclass", "len", "max", "min", "oct",
        "ord", "pow", "repr", "round", "str", "sum"],
    "world_builtins": ["__import__", "breakpoint", "compile", "delattr", "eval", "exec", "exit",
        "globals", "input", "locals", "open", "quit", "setattr"],
    # Library modules whose functions neither change their arguments nor act on the world, except where listed.
    "pure_modules": ["abc", "argparse", "array", "base64", "bisect", "collections", "contextlib",
        "copy", "dagc", "dataclasses", "datetime", "decimal", "difflib", "einops", "enum",
        "fnmatch", "fractions", "functools", "hashlib", "heapq", "inspect", "itertools", "json",
        "math", "np", "numbers", "numpy", "operator", "os.path", "pathlib", "pickle", "platform",
        "pprint", "re", "reprlib", "scipy", "shlex", "sklearn.metrics", "statistics", "string",
        "struct", "textwrap", "time", "torch", "types", "typing", "uuid", "weakref", "zlib"],
    "impure_functions": ["json.dump", "numpy.save", "numpy.savetxt", "numpy.savez", "pickle.dump",
        "torch.backends", "torch.cuda", "torch.distributed", "torch.hub", "torch.save",
        "torch.set_default_dtype", "torch.set_grad_enabled", "torch.set_num_threads",
        "torch.use_deterministic_algorithms"],
    # Seeding the global generators is an effect on global state too (it changes what later draws give).
    # (torch's own operators come from the catalogue; these are seeding functions and Python-level helpers)
    "rng_functions": ["lightning.seed_everything", "numpy.random.seed",
        "pytorch_lightning.seed_everything", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
        "torch.manual_seed", "torch.random.manual_seed", "torch.seed",
        "torch.utils.data.random_split", "transformers.set_seed"],
    "seeding": ["lightning.seed_everything", "numpy.random.seed",
        "pytorch_lightning.seed_everything", "random.seed", "torch.cuda.manual_seed_all",
        "torch.manual_seed", "torch.random.manual_seed", "transformers.set_seed"],
    "rng_prefixes": ["numpy.random.", "random."],
    "rng_exempt": ["numpy.random.Generator", "numpy.random.PCG64", "numpy.random.RandomState",
        "numpy.random.SeedSequence", "numpy.random.default_rng", "random.Random",
        "random.SystemRandom"],
    # Libraries that open files in native code, where the run-time record of files read (an audit hook on
    # Python's `open`) cannot see them: acting on the world, never cached.
    "native_file_readers": ["cv2.VideoCapture", "cv2.imread", "h5py.", "lmdb.", "netCDF4.", "pandas.read_feather",
        "pandas.read_hdf", "pandas.read_orc", "pandas.read_parquet", "pandas.read_sql", "pandas.read_sql_query",
        "pandas.read_sql_table", "pyarrow.", "safetensors.", "soundfile.", "sqlite3.", "tables.", "zarr."],
    "world_prefixes": ["boto3.", "builtins.", "ctypes.", "http.", "multiprocessing.", "os.",
        "requests.", "shutil.", "signal.", "smtplib.", "socket.", "subprocess.", "sys.", "urllib."],
    # Methods that store their arguments into their receiver: it then reaches what they reach.
    "storing_methods": ["append", "appendleft", "add", "extend", "extendleft", "insert", "setdefault", "update",
        "put", "put_nowait", "__setitem__"],
    "mutating_kwargs": ["inplace", "out"],
    # Functions and methods that read or write files (ordering among tasks: docs/ir.md "Effects and state").
    "file_reads": ["glob.glob", "glob.iglob", "joblib.load", "json.load", "numpy.fromfile",
        "numpy.genfromtxt", "numpy.load", "numpy.loadtxt", "os.listdir", "os.path.exists",
        "os.path.getmtime", "os.path.getsize", "os.path.isdir", "os.path.isfile", "os.path.lexists",
        "os.scandir", "os.stat", "os.walk", "pickle.load", "safetensors.torch.load_file",
        "torch.load", "yaml.load", "yaml.safe_load"],
    "file_writes": ["joblib.dump", "json.dump", "numpy.save", "numpy.savetxt", "numpy.savez",
        "numpy.savez_compressed", "os.chmod", "os.link", "os.makedirs", "os.mkdir", "os.remove",
        "os.removedirs", "os.rename", "os.replace", "os.rmdir", "os.symlink", "os.truncate",
        "os.unlink", "os.utime", "pickle.dump", "safetensors.torch.save_file", "tempfile.mkstemp",
        "torch.save", "yaml.dump", "yaml.safe_dump"],
    "file_prefixes_read": ["pandas.read_", "pd.read_"],
    "file_prefixes_write": ["shutil."],
    "file_read_methods": ["exists", "from_pretrained", "is_dir", "is_file", "iterdir", "read_bytes",
        "read_csv", "read_json", "read_parquet", "read_text", "rglob"],
    "file_write_methods": ["dump", "mkdir", "rmdir", "save", "save_pretrained", "savefig", "to_csv",
        "to_file", "to_json", "to_parquet", "to_pickle", "touch", "unlink", "write", "write_bytes",
        "write_text", "writelines"],
    # The argument naming the file, for the functions above that take one (others: the file is not known).
    "file_path_argument": {"glob.glob": 0, "joblib.dump": 1, "joblib.load": 0, "json.dump": 1,
        "json.load": 0, "numpy.fromfile": 0, "numpy.genfromtxt": 0, "numpy.load": 0,
        "numpy.loadtxt": 0, "numpy.save": 0, "numpy.savetxt": 0, "numpy.savez": 0,
        "numpy.savez_compressed": 0, "os.listdir": 0, "os.makedirs": 0, "os.mkdir": 0,
        "os.path.exists": 0, "os.path.getsize": 0, "os.path.isdir": 0, "os.path.isfile": 0,
        "os.remove": 0, "os.unlink": 0, "pandas.read_csv": 0, "pandas.read_json": 0,
        "pandas.read_parquet": 0, "pickle.dump": 1, "pickle.load": 0, "safetensors.torch.load_file":
        0, "safetensors.torch.save_file": 1, "shutil.rmtree": 0, "torch.load": 0, "torch.save": 1},
    # Methods whose receiver is the path (`Path(p).write_text(...)`); other file methods take it first.
    "path_methods": ["exists", "is_dir", "is_file", "iterdir", "mkdir", "open", "read_bytes",
        "read_text", "rglob", "rmdir", "touch", "unlink", "write_bytes", "write_text"],
    # Library functions that return a view of an argument, or an object holding references to it.
    "aliasing_functions": ["numpy.array_split", "numpy.asanyarray", "numpy.asarray",
        "numpy.atleast_1d", "numpy.atleast_2d", "numpy.broadcast_to", "numpy.frombuffer",
        "numpy.lib", "numpy.ravel", "numpy.reshape", "numpy.split", "numpy.squeeze",
        "numpy.transpose", "torch.as_tensor", "torch.atleast_1d", "torch.atleast_2d",
        "torch.broadcast_to", "torch.chunk", "torch.compile", "torch.detach", "torch.diagonal",
        "torch.flatten", "torch.from_numpy", "torch.func", "torch.jit", "torch.movedim",
        "torch.narrow", "torch.nn.init", "torch.permute", "torch.reshape", "torch.select",
        "torch.split", "torch.squeeze", "torch.swapaxes", "torch.t", "torch.tensor_split",
        "torch.transpose", "torch.unbind", "torch.unsqueeze", "torch.utils",
        "torch.view_as_complex", "torch.view_as_real"],
    # Reading the clock, sleeping, asking the process or host who it is: no effect on what a task computes
    # (the varying functions above too).
    "no_effect": ["os.cpu_count", "os.environ.get", "os.fspath", "os.getcwd", "os.getenv",
        "os.path.abspath", "os.path.basename", "os.path.dirname", "os.path.join",
        "os.path.normpath", "os.path.splitext", "platform.node", "platform.system",
        "socket.gethostname", "sys.getrecursionlimit", "sys.getsizeof", "time.sleep"],
    # Calls that seed a process-wide generator, by their dotted name as written (common import aliases): a seed
    # set under `if __name__ == "__main__":` (dagc/frontend/seeds.py).
    "seed_calls": ["L.seed_everything", "lightning.seed_everything", "np.random.seed",
        "numpy.random.seed", "pl.seed_everything", "random.seed", "seed_everything", "set_seed",
        "tf.random.set_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
        "torch.manual_seed", "torch.random.manual_seed", "transformers.set_seed"],
}


# Estimators whose fit draws from numpy's global generator although what they compute does not depend on the
# draw: libsvm seeds its own generator for probability estimates only (scikit-learn's docs: `random_state` is
# "ignored when `probability` is False"). Listed from the docs, and kept only where two fits from different
# global seeds are seen to agree (a small probe cannot prove that alone: a boosted or mixture model can agree
# on a small sample and still depend on the seed).
ADVANCES_ONLY = frozenset({"sklearn.svm.SVC", "sklearn.svm.NuSVC", "sklearn.svm.SVR", "sklearn.svm.NuSVR",
                           "sklearn.svm.OneClassSVM"})
# numpy.random's constructors and queries: they draw nothing from the global generator
_NOT_DRAWS = {"default_rng", "get_state", "get_bit_generator", "test", "seed", "set_state", "set_bit_generator"}
# pandas first parameters that name a file (`read_csv(filepath_or_buffer)`, `to_parquet(path)`)
_PATH_PARAMETERS = {"filepath_or_buffer", "path", "path_or_buf", "path_or_buffer", "io", "excel_writer", "buf"}


def _public_callables(module: Any) -> dict[str, Any]:
    return {n: getattr(module, n) for n in sorted(dir(module)) if not n.startswith("_")
            and callable(getattr(module, n, None))}


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _numpy(functions: dict[str, dict[str, Any]]) -> str:
    import numpy as np

    for name, obj in _public_callables(np).items():
        if isinstance(obj, np.ufunc):
            functions[f"numpy.{name}"] = {"out": True}
    for prefix, module in (("numpy", np), ("numpy.linalg", np.linalg), ("numpy.fft", np.fft)):
        for name, obj in _public_callables(module).items():
            if isinstance(obj, (type, np.ufunc)):
                continue
            sig = _signature(obj)
            if sig is not None and "out" in sig.parameters:
                functions.setdefault(f"{prefix}.{name}", {})["out"] = True
    for name, obj in _public_callables(np.random).items():
        if not isinstance(obj, type) and name not in _NOT_DRAWS:
            functions.setdefault(f"numpy.random.{name}", {})["rng"] = True
    return np.__version__


def _generators(methods: dict[str, dict[str, Any]]) -> None:
    """The methods of random generator objects (numpy's `Generator` and `RandomState`, the standard library's
    `random.Random`): each draw advances the generator, so a generator passed to a task is changed by it."""
    import random

    import numpy as np

    for cls, library in ((np.random.Generator, "numpy"), (np.random.RandomState, "numpy"), (random.Random, "random")):
        for name in sorted(dir(cls)):
            if name.startswith("_") or name in ("bit_generator", "spawn", "getstate", "get_state", "__reduce__"):
                continue
            if callable(getattr(cls, name, None)):
                entry = methods.setdefault(name, {})
                entry["self"] = True
                if library not in entry.setdefault("libraries", []):
                    entry["libraries"].append(library)


def _pandas(functions: dict[str, dict[str, Any]], methods: dict[str, dict[str, Any]]) -> str:
    import pandas as pd

    for name, obj in _public_callables(pd).items():
        if name.startswith("read_") and not isinstance(obj, type):
            sig = _signature(obj)
            first = next(iter(sig.parameters), None) if sig is not None else None
            if first in _PATH_PARAMETERS:
                functions[f"pandas.{name}"] = {"reads_file": 0}
    for cls in (pd.DataFrame, pd.Series, pd.Index):
        for name in sorted(dir(cls)):
            if name.startswith("_"):
                continue
            sig = _signature(getattr(cls, name))
            if sig is None:
                continue
            params = [p for p in sig.parameters if p != "self"]
            if "inplace" in sig.parameters:
                methods.setdefault(name, {})["inplace"] = True
            if name.startswith("to_") and params and params[0] in _PATH_PARAMETERS:
                # `to_string(buf=None)` returns the text unless given a buffer: it writes only when given one
                given = sig.parameters[params[0]].default is not inspect.Parameter.empty
                methods.setdefault(name, {})["writes_file" if not given else "writes_file_if_given"] = 0
    return pd.__version__


def _public_sklearn_names() -> dict[int, str]:
    """id(object) -> the public name it has (`sklearn.linear_model.LogisticRegression`): the shortest."""
    import sklearn

    found: dict[int, str] = {}
    for info in pkgutil.walk_packages(sklearn.__path__, "sklearn."):
        if any(part.startswith("_") for part in info.name.split(".")) or ".tests" in info.name:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional dependency missing: its names are not catalogued
            continue
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if obj is None:
                continue
            full = f"{info.name}.{name}"
            if id(obj) not in found or len(full) < len(found[id(obj)]):
                found[id(obj)] = full
    return found


def _fit_draws(cls: Any) -> bool | None:
    """Whether fitting the estimator with its default options, on small data, draws from numpy's global
    generator (watched, as the run-time check does); None where it cannot be built or fitted here."""
    import numpy as np

    data = np.random.RandomState(0)
    x = data.rand(40, 3)
    targets = ((x[:, 0] > 0.5).astype(int), x[:, 0] * 2.0 + x[:, 1], None)
    for y in targets:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                estimator = cls()
                np.random.seed(1234)
                before = np.random.get_state()[1].copy()
                estimator.fit(x) if y is None else estimator.fit(x, y)
                return bool((np.random.get_state()[1] != before).any())
        except Exception:  # noqa: BLE001 - another kind of target, or options it needs: try the next
            continue
    return None


def _depends_on_draws(cls: Any) -> bool:
    """Whether what the fitted estimator computes depends on the global generator's state: fitted twice with
    default options from two different global seeds, do its predictions (or transforms) differ? SVC's fit
    draws one number that its default options never use: it only advances the generator."""
    import numpy as np

    data = np.random.RandomState(0)
    x, probe = data.rand(60, 4), data.rand(30, 4)  # noisy targets, and predictions on points not fitted
    for y in (data.randint(0, 2, 60), data.rand(60), None):
        outputs = []
        try:
            for seed in (1, 2):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    np.random.seed(seed)
                    estimator = cls()
                    estimator.fit(x) if y is None else estimator.fit(x, y)
                    method = next(m for m in ("predict_proba", "decision_function", "transform", "score_samples",
                                              "predict") if hasattr(estimator, m))
                    outputs.append(np.asarray(getattr(estimator, method)(probe), dtype=float))
        except Exception:  # noqa: BLE001 - another kind of target: try the next
            continue
        return not np.array_equal(outputs[0], outputs[1])
    return True


def _draws_unless_given(obj: Any) -> bool:
    sig = _signature(obj.__init__ if isinstance(obj, type) else obj)
    param = sig.parameters.get("random_state") if sig is not None else None
    return param is not None and param.default is None


def _sklearn(functions: dict[str, dict[str, Any]], classes: dict[str, dict[str, Any]],
             methods: dict[str, dict[str, Any]]) -> str:
    import sklearn
    from sklearn.utils import all_estimators

    public = _public_sklearn_names()
    for _, cls in all_estimators():
        name = public.get(id(cls))
        if name is None:
            continue
        entry: dict[str, Any] = {"estimator": True}
        draws = _fit_draws(cls)
        if _draws_unless_given(cls) and draws is not False:
            entry["rng_unless"] = "random_state"
        elif draws:  # no option to seed it (OneClassSVM's libsvm): only the global seed decides its draws
            entry["rng"] = True
        if draws and name in ADVANCES_ONLY and not _depends_on_draws(cls):
            entry["rng_advances"] = True  # it draws, but what it computes does not depend on the draws
            entry["rng_depends_if"] = "probability"  # (`probability=True`: Platt scaling uses the draw)
        classes[name] = entry
        for method in dir(cls):
            if method.startswith(("fit", "partial_fit", "set_")) and callable(getattr(cls, method, None)):
                methods.setdefault(method, {})["self"] = True
    estimators = {id(cls) for _, cls in all_estimators()}
    for key, name in sorted(public.items(), key=lambda item: item[1]):
        obj = next((o for o in _objects_by_id(name) if id(o) == key), None)
        if obj is None or isinstance(obj, type) or key in estimators or not callable(obj):
            continue
        if _draws_unless_given(obj):
            functions[name] = {"rng_unless": "random_state"}
            sig = _signature(obj)
            shuffle = sig.parameters.get("shuffle") if sig is not None else None
            if shuffle is not None and shuffle.default is True:  # `train_test_split(..., shuffle=False)`
                functions[name]["rng_unless_false"] = "shuffle"
    return sklearn.__version__


def _objects_by_id(name: str) -> list[Any]:
    module, _, attr = name.rpartition(".")
    found = getattr(sys.modules.get(module), attr, None)
    return [found] if found is not None else []


def build() -> dict[str, Any]:
    functions: dict[str, dict[str, Any]] = {}
    classes: dict[str, dict[str, Any]] = {}
    methods: dict[str, dict[str, Any]] = {}
    versions = {"numpy": _numpy(functions), "pandas": _pandas(functions, methods),
                "scikit-learn": _sklearn(functions, classes, methods)}
    _generators(methods)
    for name, facts in HAND_WRITTEN["functions"].items():
        functions.setdefault(name, {}).update(facts)
    for name, library in HAND_WRITTEN["methods"].items():
        methods.setdefault(name, {})["self"] = True
        methods[name].setdefault("libraries", []).append(library)
    return {"generated_by": "scripts/gen_library_catalog.py", "versions": versions, "functions": functions,
            "classes": classes, "methods": methods, "copy_on_write": ["pandas"], "tables": HAND_TABLES}


def main(argv: list[str] | None = None) -> int:
    from gen_effect_catalog import write_or_check  # (this folder: the torch catalogue's generator)

    return write_or_check(OUT, build, __doc__.splitlines()[0], "gen_library_catalog.py", argv)


if __name__ == "__main__":
    sys.exit(main())
