"""Effects inferred from a task's body: which arguments it changes in place, which module-level state it
reads or writes, the files it reads or writes, its draws from random generators and its actions on the world,
including what the torch, numpy, pandas and scikit-learn metadata says of library calls (docs/ir.md,
"Effects and state")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.effect_sources import HISTORY_TASKS, effects_of
from tests.property import examples


# ---- inference ------------------------------------------------------------------------------------
def test_in_place_training_step_mutates_model_and_optimizer(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def train(model, optimizer, loader, epoch: int) -> None:
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                loss = ((model(x) - y) ** 2).mean()
                loss.backward()
                optimizer.step()
    """)
    assert {"model", "optimizer"} <= set(found["train"].mutates)
    assert "epoch" not in found["train"].mutates  # an int cannot change in place
    assert found["train"].definite["model"].reason == "calls `.train()` on `model`"


@pytest.mark.parametrize("body, param", [
    ("log.append(1)", "log"),
    ("log['k'] = 1", "log"),
    ("log.attr = 1", "log"),
    ("del log[0]", "log"),
    ("log += [1]", "log"),
    ("setattr(log, 'x', 1)", "log"),
    ("first = log[0]\nfirst.append(2)", "log"),
    ("for item in log:\n    item.clear()", "log"),
    ("log.fill_(0)", "log"),
    ("log.set_epoch(3)", "log"),
    ("log.sort()", "log"),
    ("log.fit([[1]], [1])", "log"),
    ("log.drop(columns=['a'], inplace=True)", "log"),
    ("log.normal(size=3)", "log"),  # a generator passed in: each draw advances it
    ("import random\nrandom.Random(0).shuffle(log)", "log"),
])
def test_evidence_of_mutation(tmp_path: Path, body: str, param: str) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef change(log, other):\n" + textwrap.indent(body, "    ") + "\n")
    assert param in found["change"].mutates
    assert "other" not in found["change"].mutates


@pytest.mark.parametrize("body", [
    "return len(log) + sum(log)",
    "return sorted(log)[0]",
    "copy = dict(log)\ncopy['k'] = 1\nreturn copy",
    "new = list(log)\nnew.append(1)\nreturn new",
    "return [x * 2 for x in log]",
    "return {k: v for k, v in log.items()}",
    "return log.get('k', 0)",
    "import json\nreturn json.dumps(log)",
    # a library call reads its arguments unless its metadata says otherwise (the run-time check is the backstop)
    "return unknown_library_call(log)",
    "return log.some_method_dagc_does_not_know()",
    "import pandas as pd\nreturn pd.json_normalize(log)",
    "return log.drop(columns=['a'])",
    "return log.drop(columns=['a'], inplace=False)",
    "return log.to_json()",
    "return log.predict([[1]])",
])
def test_read_only_bodies_mutate_nothing(tmp_path: Path, body: str) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef read(log):\n" + textwrap.indent(body, "    ") + "\n")
    assert not found["read"].mutates


def test_helpers_and_user_classes_are_analysed(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        def _push(xs, v):
            xs.append(v)

        def _peek(xs):
            return xs[-1]

        @dagc.task
        def push(log, other):
            _push(log, 1)
            return _peek(other)
    """)
    assert set(found["push"].mutates) == {"log"}


def test_module_state_and_the_world(tmp_path: Path) -> None:
    found = effects_of(tmp_path, HISTORY_TASKS + textwrap.dedent("""
        @dagc.task
        def shout(x: int) -> None:
            print(x)

        @dagc.task
        def quiet(x: int) -> str:
            return str(x)
    """))
    assert set(found["record"].globals_written) == {"m.HISTORY"}
    assert found["count"].globals_read == {"m.HISTORY"} and not found["count"].globals_written
    # printing is an output channel: kept, but not state and not an action on the world
    assert found["shout"].output is not None and found["shout"].world is None and found["quiet"].output is None
    assert found["quiet"].is_pure


def test_file_reads_and_writes(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        import json
        import pathlib
        import torch

        def _dump(obj, path):
            with open(path, "w") as f:
                json.dump(obj, f)

        @dagc.task
        def reads(path: str) -> str:
            with open(path) as f:
                return f.read()

        @dagc.task
        def reads_binary(path: str) -> bytes:
            return open(path, mode="rb").read()

        @dagc.task
        def saves(model, path: str) -> None:
            torch.save(model, path)

        @dagc.task
        def writes_text(path: str) -> None:
            pathlib.Path(path).write_text("x")

        @dagc.task
        def appends(path: str, mode: str) -> None:
            open(path, mode).close()

        @dagc.task
        def through_helper(path: str) -> None:
            _dump({"a": 1}, path)

        @dagc.task
        def no_files(x: int) -> int:
            return x + 1
    """)
    def mode(name: str) -> str | None:
        e = found[name]
        return "write" if e.file_write else "read" if e.file_read else None

    assert {name: mode(name) for name in found} == {
        "reads": "read", "reads_binary": "read", "saves": "write", "writes_text": "write",
        "appends": "write",  # a mode dagc cannot read is a write
        "through_helper": "write", "no_files": None}


def test_global_random_generators(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        import numpy as np
        import torch

        @dagc.task
        def flip() -> int:
            return random.randint(0, 1)

        @dagc.task
        def seeded(seed: int) -> float:
            random.seed(seed)
            return random.random()

        @dagc.task
        def own_generator(seed: int) -> float:
            return float(torch.randn(2, generator=torch.Generator().manual_seed(seed)).sum())

        @dagc.task
        def numpy_draw() -> float:
            return float(np.random.rand())

        @dagc.task
        def init_layer() -> dict:
            return torch.nn.Linear(2, 2).state_dict()
    """)
    assert found["flip"].rng is not None and not found["flip"].seeds
    assert found["seeded"].rng is not None and found["seeded"].seeds
    assert found["own_generator"].rng is None
    assert found["numpy_draw"].rng is not None
    assert found["init_layer"].rng is not None


# ---- copies, forward passes, library metadata ------------------------------------------------------------
@pytest.mark.parametrize("body, changed", [
    ("log = log.copy()\nlog['c'] = 1", False),
    ("import copy\nlog = copy.deepcopy(log)\nlog['a']['b'] = 1", False),
    ("log = dict(log)\nlog['k'] = 1", False),
    ("log = dict(log)\nlog['k'].append(1)", True),  # a shallow copy: its items are still the caller's
    ("log = list(log)\nlog.append(1)", False),
    ("log = log.clone()\nlog.add_(1)", False),
    ("print(len(log))\nlog = log.copy()\nlog['c'] = 1", True),  # (conservative: mentioned before the copy)
    ("log['c'] = 0\nlog = log.copy()", True),  # changed before it was copied
    ("log = log.to('cpu')\nlog.fill_(0)", True),  # not a copy: a module's .to() returns itself
])
def test_a_parameter_rebound_to_a_copy_is_a_new_object(tmp_path: Path, body: str, changed: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef change(log):\n" + textwrap.indent(body, "    ") + "\n")
    assert ("log" in found["change"].mutates) is changed


def test_a_forward_pass_reads_its_inputs(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def evaluate(model, data) -> float:
            model.eval()
            return float(model(data).sum())

        @dagc.task
        def forward(model, data):
            return model(data)
    """)
    assert "data" not in found["evaluate"].mutates and "data" not in found["forward"].mutates
    assert found["evaluate"].mutates["model"].reason == "calls `.eval()` on `model`"
    assert "batch-norm running statistics" in found["forward"].mutates["model"].reason


@pytest.mark.parametrize("body, rng", [
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier().fit(x, y)", True),
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier(random_state=0).fit(x, y)", False),
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier(random_state=None).fit(x, y)", True),
    ("from sklearn.linear_model import LogisticRegression\nLogisticRegression(C=p['C']).fit(x, y)", False),
    ("from sklearn.svm import OneClassSVM\nOneClassSVM().fit(x)", True),  # libsvm: no seed to give
    ("from sklearn.model_selection import train_test_split\ntrain_test_split(x, y)", True),
    ("from sklearn.model_selection import train_test_split\ntrain_test_split(x, y, random_state=3)", False),
    ("import numpy as np\nnp.random.permutation(5)", True),
    ("import numpy as np\nnp.random.default_rng(0).permutation(5)", False),
])
def test_scikit_learn_and_numpy_draws_follow_their_metadata(tmp_path: Path, body: str, rng: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef fit(x, y, p):\n" + textwrap.indent(body, "    ") + "\n")
    assert (found["fit"].rng is not None) is rng
    assert not found["fit"].mutates and found["fit"].world is None  # reads x, y and its hyperparameters


@pytest.mark.parametrize("body, changed", [
    ("import numpy as np\nnp.add(x, 1, out=x)", {"x"}),
    ("import numpy as np\nnp.copyto(x, y)", {"x"}),
    ("import numpy as np\nreturn np.add(x, y)", set()),
    ("import heapq\nheapq.heappush(x, 1)", {"x"}),
    ("import pandas as pd\nreturn pd.concat([x, y])", set()),
    ("x.sort_values('a', inplace=True)", {"x"}),
    ("return x.sort_values('a')", set()),
    ("x.pop('a')", {"x"}),
    ("x.update(y)", {"x"}),
    ("return x.merge(y, on='k')", set()),
])
def test_numpy_pandas_and_the_standard_library_change_what_their_metadata_says(
        tmp_path: Path, body: str, changed: set[str]) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef f(x, y):\n" + textwrap.indent(body, "    ") + "\n")
    assert set(found["f"].mutates) == changed
    assert found["f"].world is None


@pytest.mark.parametrize("body, rng, depends", [
    ("from sklearn.svm import SVC\nSVC(gamma=0.1).fit(x, y)", True, False),  # libsvm's draw: probability only
    ("from sklearn.svm import SVC\nSVC(probability=True).fit(x, y)", True, True),
    ("from sklearn.model_selection import train_test_split\ntrain_test_split(x, y, shuffle=False)", False, False),
    ("from sklearn.ensemble import RandomForestClassifier\nRandomForestClassifier().fit(x, y)", True, True),
])
def test_a_draw_that_decides_nothing_only_advances_the_generator(tmp_path: Path, body: str, rng: bool,
                                                                  depends: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef fit(x, y):\n" + textwrap.indent(body, "    ") + "\n")
    assert (found["fit"].rng is not None) is rng
    assert found["fit"].rng_depends is depends


# ---- a property over random mixes of library calls whose effects the libraries' metadata gives ------------
# (statement, parameters it changes, whether it depends on the global generator); each reads or writes the
# parameters directly, so a body of several changes exactly the union, and draws when any one does
LIBRARY_CALLS = [
    ("frame.sort_values('a', inplace=True)", {"frame"}, False),
    ("frame.drop(columns=['a'], inplace=False)", set(), False),
    ("frame.pop('a')", {"frame"}, False),
    ("out = frame.merge(table, on='a')\nout['z'] = 1", set(), False),
    ("copy = frame.copy()\ncopy['c'] = 1", set(), False),
    ("pd.concat([frame, table]).reset_index(drop=True)", set(), False),
    ("pd.json_normalize(rows)", set(), False),
    ("np.add(arr, 1, out=arr)", {"arr"}, False),
    ("np.copyto(arr, 0)", {"arr"}, False),
    ("np.sort(arr)", set(), False),
    ("arr.sort()", {"arr"}, False),
    ("arr.mean()", set(), False),
    ("heapq.heappush(rows, 1)", {"rows"}, False),
    ("sorted(rows)", set(), False),
    ("model.fit(arr, arr)", {"model"}, False),
    ("model.predict(arr)", set(), False),
    ("model.set_params(C=1.0)", {"model"}, False),
    ("gen.normal(size=2)", {"gen"}, False),
    ("np.random.rand(2)", set(), True),
    ("train_test_split(frame, random_state=0)", set(), False),
    ("train_test_split(frame)", set(), True),
    ("RandomForestClassifier(random_state=1).fit(arr, arr)", set(), False),
    ("SVC().fit(arr, arr)", set(), False),  # draws, but only advances the generator
    ("list(csv.reader(io.StringIO(text)))", set(), False),
    ("json.dumps(rows)", set(), False),
]
LIBRARY_HEAD = '''\
import csv
import heapq
import io
import json

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

import dagc


@dagc.task
def t(frame: pd.DataFrame, table: pd.DataFrame, arr: np.ndarray, rows, model, gen, text: str):
'''


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(range(len(LIBRARY_CALLS))), min_size=1, max_size=6))
def test_random_mixes_of_library_calls_have_the_effects_their_metadata_gives(tmp_path: Path, picks: list[int]) -> None:
    body = "".join(textwrap.indent(LIBRARY_CALLS[k][0], "    ") + "\n" for k in picks)
    found = effects_of(tmp_path, LIBRARY_HEAD + body)["t"]
    changed = set().union(*(LIBRARY_CALLS[k][1] for k in picks))
    assert set(found.mutates) == changed, body
    assert (found.rng is not None and found.rng_depends) is any(LIBRARY_CALLS[k][2] for k in picks), body
    assert found.world is None, body


# ---- what a review of the library model found: each case really changes what the plain run sees -------------
@pytest.mark.parametrize("body, changed", [
    ("cfg = dict(cfg)\ncfg = cfg['model']\ncfg['lr'] = 99.0", True),  # an item of a shallow copy is the caller's
    ("from collections import deque\ncfg.appendleft(1)", True),
    ("cfg.rotate(1)", True),
    ("cfg.move_to_end('a')", True),
    ("cfg.difference_update({1})", True),
    ("import numpy as np\nnp.nan_to_num(cfg, copy=False)", True),
    ("import numpy as np\nnp.add.at(cfg, [0], 1)", True),
    ("import numpy as np\nreturn np.nan_to_num(cfg)", False),
])
def test_changes_the_library_model_must_not_miss(tmp_path: Path, body: str, changed: bool) -> None:
    found = effects_of(tmp_path, "@dagc.task\ndef t(cfg):\n" + textwrap.indent(body, "    ") + "\n")
    assert ("cfg" in found["t"].mutates) is changed


def test_a_container_the_task_stores_an_argument_into_is_not_a_fresh_result(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def wrap(model):
            out = {}
            out["m"] = model
            return out

        @dagc.task
        def collect(models):
            out = []
            for m in models:
                out.append(m)
            return out

        @dagc.task
        def summary(model) -> dict:
            out = {}
            out["n"] = len(model)
            return out
    """)
    assert not found["wrap"].fresh_result and not found["collect"].fresh_result
    assert found["summary"].fresh_result


def test_native_file_readers_act_on_the_world(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        @dagc.task
        def load(db: str) -> int:
            import sqlite3
            return sqlite3.connect(db).execute("select 1").fetchone()[0]
    """)
    assert found["load"].world is not None and "native code" in found["load"].world.reason


def test_a_library_reader_given_a_file_opened_at_the_call_reads_that_file(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        import json
        import pickle

        import numpy as np
        import torch

        @dagc.task
        def load(meta: str, weights: str, array: str) -> tuple:
            return json.load(open(meta)), pickle.load(open(weights, "rb")), torch.load(array), np.load(array)

        @dagc.task
        def dump(x: dict, path: str) -> None:
            json.dump(x, open(path, "w"))
    """)
    load, dump = found["load"], found["dump"]
    assert load.world is None and load.file_write is None and load.file_paths_known  # a read, of named files
    assert load.file_paths["read"] == {"param:meta", "param:weights", "param:array"}
    assert dump.world is not None and dump.file_paths_known and dump.file_paths["write"] == {"param:path"}


def test_a_path_opened_to_read_is_a_read_and_opened_otherwise_a_write(tmp_path: Path) -> None:
    found = effects_of(tmp_path, """
        from pathlib import Path

        @dagc.task
        def load(path: str) -> bytes:
            with Path(path).open("rb") as f:
                head = f.read(4)
            return head + Path(path).open().read().encode() + Path(path).open(mode="r", encoding="utf-8").read().encode()

        @dagc.task
        def save(path: str, text: str) -> None:
            with Path(path).open("w") as f:
                f.write(text)
    """)
    load, save = found["load"], found["save"]
    assert load.file_write is None and load.file_paths_known and load.file_paths["read"] == {"param:path"}
    assert save.file_write is not None and save.file_paths["write"] == {"param:path"}
