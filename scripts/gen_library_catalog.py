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
    signatures do not) are written by hand in `dagc/frontend/effect_knowledge.json` (`library_functions`,
    `receiver_methods`), which dagc's loader merges over this file, with all else no metadata says.
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
    return {"generated_by": "scripts/gen_library_catalog.py", "versions": versions, "functions": functions,
            "classes": classes, "methods": methods, "copy_on_write": ["pandas"]}


def main(argv: list[str] | None = None) -> int:
    from gen_effect_catalog import write_or_check  # (this folder: the torch catalogue's generator)

    return write_or_check(OUT, build, __doc__.splitlines()[0], "gen_library_catalog.py", argv)


if __name__ == "__main__":
    sys.exit(main())
