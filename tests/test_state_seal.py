"""Task state saved with `dagc.context().save_state` (torch.distributed.checkpoint) is sealed with this
user's store key, and `load_state` reads nothing that does not match the seal: torch unpickles a checkpoint's
metadata, so a file planted in a run directory's `state/` (or a checkpoint another user rewrote) would run
code on `--resume`. Here the planted pickle would write a marker file; the test asserts it never does."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dagc.runtime.context import TaskContext  # noqa: E402


class Planted:
    """What an attacker's pickle does when it is loaded: here, write a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.write_text, (self.marker, "code ran"))


def _context(tmp_path: Path) -> TaskContext:
    return TaskContext(run_dir=tmp_path / "run", task="fit")


def test_saved_state_loads_back(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.save_state({"w": torch.arange(4.0), "step": torch.tensor([3])})
    loaded = {"w": torch.zeros(4), "step": torch.tensor([0])}
    assert ctx.load_state(loaded) is True
    assert loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and int(loaded["step"]) == 3


@pytest.mark.parametrize("attack", ["unsealed", "rewritten", "added", "forged seal"])
def test_a_planted_checkpoint_is_never_unpickled(tmp_path: Path, attack: str, capsys) -> None:
    ctx = _context(tmp_path)
    marker = tmp_path / "marker"
    state_dir = ctx.state_dir / "latest"
    if attack == "unsealed":  # a checkpoint with an old-style marker, written by someone else
        state_dir.mkdir(parents=True)
        (state_dir / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
        (state_dir / ".complete").write_text("ok\n")
    else:
        state_dir = ctx.save_state({"w": torch.arange(4.0)})
        if attack == "rewritten":  # the sealed metadata replaced by the attacker's pickle
            (state_dir / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
        elif attack == "added":  # an extra file beside the sealed ones
            (state_dir / "__0_1.distcp").write_bytes(pickle.dumps(Planted(marker)))
        else:  # a manifest naming the planted file's digest, without this user's key to seal it
            import json

            (state_dir / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
            seal = state_dir.parent / ".complete"
            manifest = json.loads(seal.read_text())
            manifest["files"][".metadata"] = "0" * 64
            seal.write_text(json.dumps(manifest))
    loaded = {"w": torch.zeros(4)}
    assert ctx.load_state(loaded) is False
    assert not marker.exists()
    assert loaded["w"].tolist() == [0.0] * 4  # untouched: the task starts from the beginning
    err = capsys.readouterr().err
    assert "is not loaded" in err and str(ctx.state_dir / "latest") in err


def test_a_save_keeps_the_last_complete_version(tmp_path: Path) -> None:
    """Each save writes a new version and seals it; the older one is removed only then, so a save that stops
    half-way (a rank died) leaves the last complete state to resume from."""
    ctx = _context(tmp_path)
    first = ctx.save_state({"step": torch.tensor([1])})
    second = ctx.save_state({"step": torch.tensor([2])})
    assert first.name == "v1" and second.name == "v2" and not first.exists()
    (second.parent / "v3").mkdir()  # a save that died before its seal
    (second.parent / "v3" / ".metadata").write_bytes(b"half")
    loaded = {"step": torch.tensor([0])}
    assert ctx.load_state(loaded) and int(loaded["step"]) == 2
