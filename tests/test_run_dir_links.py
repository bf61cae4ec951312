"""A run directory shared with `--trust-shared` may hold links another user planted: dagc never writes
through them. A `.lock` or `events.jsonl` that is a symbolic link leaves the file it names untouched; the lock
is refused with one line naming the path, the event log is not written (one warning), `dagc runs` treats the
directory as held."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagc.runtime.events import EventLog
from dagc.runtime.store import RunStore, StorageError
from dagc.runtime.store.records import directory_held


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("the other user's file\n", encoding="utf-8")
    return victim


def test_a_lock_that_is_a_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    store = RunStore(tmp_path / "run")
    (store.root / ".lock").symlink_to(victim)
    with pytest.raises(StorageError, match=r"\.lock is a symbolic link"):
        store.lock("r1")
    assert victim.read_text(encoding="utf-8") == "the other user's file\n"
    assert directory_held(store.root)  # never taken for a free directory `dagc gc` may remove


def test_an_event_log_that_is_a_link_is_not_written_through(tmp_path: Path, capsys) -> None:
    victim = _victim(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").symlink_to(victim)
    log = EventLog(run / "events.jsonl", "r1")
    log.write("run_start", pipeline="p")
    log.write("run_end")
    assert victim.read_text(encoding="utf-8") == "the other user's file\n"
    assert capsys.readouterr().err.count("cannot write the event log") == 1


@pytest.mark.parametrize("planted", ['[["stdout", "\\u001b]0;owned\\u0007\\u001b[2J"]]', '{"chunks": 5}', '[1, 2, 3]',
                                     '{"chunks": [["stdout", "hi"]], "seal": "00"}'])
def test_recorded_console_output_is_replayed_only_under_its_seal(tmp_path: Path, planted: str, capsys) -> None:
    """What a reused task printed is written to the terminal again: only from a record this user's dagc sealed
    (a planted one could send escape sequences to the terminal), and never a traceback for a wrong shape."""
    from dagc.runtime.console import console_path, load_console, replay, save_console

    output = tmp_path / "task.pkl"
    save_console(output, [("stdout", "epoch 1\n"), ("stderr", "warn\n")])
    assert load_console(output) == [("stdout", "epoch 1\n"), ("stderr", "warn\n")]
    console_path(output).write_text(planted, encoding="utf-8")
    chunks = load_console(output)
    assert chunks == []
    replay(chunks, "task", "the run directory")
    assert "\x1b" not in capsys.readouterr().out
