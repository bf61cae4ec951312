"""Sharded training whose fan-out width depends on its data: a `map` region.

`list_shards` decides at run time how many shards the rows make; the `for` loop over its result
runs `preprocess` and `shard_stats` once per shard (a map: on Ray each shard is its own Ray task,
at most `concurrency` at once), then `train` fits a line to the merged shards. `dagc.each` plans
the loop as 8 shards and stops a run that finds more than 1000; as plain Python it returns the
shards unchanged. Runs as plain Python in well under a second: `python samples/sharded_training.py`.
"""

from __future__ import annotations

import random

import dagc


@dagc.task(cost="20ms", pure=True)
def list_shards(n_rows: int, rows_per_shard: int) -> list[dict]:
    """The shards of the data set: how many depends on its size."""
    starts = range(0, n_rows, rows_per_shard)
    return [{"shard": i, "start": s, "stop": min(s + rows_per_shard, n_rows)} for i, s in enumerate(starts)]


@dagc.task(cost="50ms", pure=True)
def preprocess(shard: dict, seed: int) -> list[tuple[float, float]]:
    """Rows (x, y) of one shard: y = 3x + 0.5 with noise; x scaled to [0, 1)."""
    rng = random.Random(seed * 1000 + shard["shard"])
    return [(i / 1000, 3.0 * i / 1000 + 0.5 + rng.gauss(0.0, 0.05)) for i in range(shard["start"], shard["stop"])]


@dagc.task(cost="5ms", pure=True)
def shard_stats(rows: list[tuple[float, float]]) -> dict:
    ys = [y for _, y in rows]
    return {"rows": len(rows), "mean_y": round(sum(ys) / len(ys), 4) if ys else 0.0}


@dagc.task(cost="300ms", pure=True)
def train(shards: list[list[tuple[float, float]]], epochs: int, lr: float) -> dict:
    """Full-batch gradient descent on a line through every row of every shard."""
    rows = [row for shard in shards for row in shard]
    w = b = 0.0
    for _ in range(epochs):
        gw = gb = 0.0
        for x, y in rows:
            err = w * x + b - y
            gw += err * x
            gb += err
        w -= lr * 2 * gw / max(len(rows), 1)
        b -= lr * 2 * gb / max(len(rows), 1)
    return {"w": round(w, 4), "b": round(b, 4), "rows": len(rows)}


@dagc.task(cost="5ms", pure=True)
def report(model: dict, stats: list[dict]) -> dict:
    return {"model": model, "shards": len(stats), "rows_per_shard": [s["rows"] for s in stats]}


@dagc.pipeline
def sharded_training(n_rows: int = 1000, rows_per_shard: int = 150, epochs: int = 200, lr: float = 0.5) -> dict:
    shards = list_shards(n_rows, rows_per_shard)
    prepared = []
    stats = []
    for shard in dagc.each(shards, expected=8, max_items=1000, concurrency=8):
        rows = preprocess(shard, seed=7)
        prepared.append(rows)
        stats.append(shard_stats(rows))
    model = train(prepared, epochs, lr)
    return report(model, stats)


if __name__ == "__main__":
    print(sharded_training())
