"""A training pipeline written the way Kubeflow Pipelines users write theirs.

KFP components become tasks, with their resources as task options in the units a pod spec uses
(`memory="500Mi"`, `cpus="500m"`) instead of `.set_memory_limit()`/`.set_cpu_limit()` calls;
`dsl.ParallelFor` over a constant list is a comprehension, `dsl.Condition`/`dsl.If` an `if` on a
task result, a training loop with early exit a bounded `for` with `if <result>: break`, and
`dsl.ExitHandler` (a step that runs whether the steps it guards succeed or fail) `try:` ... `finally:`.
Runs as plain Python in well under a second: `python samples/kfp_training.py`.
"""

from __future__ import annotations

import math
import random

import dagc

LEARNING_RATES = [0.01, 0.03, 0.1]
MAX_ROUNDS = 30


@dagc.task(cpus="500m", memory="500Mi", cost="20ms", pure=True)
def download(n: int, seed: int) -> dict:
    rng = random.Random(seed)
    xs = [rng.uniform(-2, 2) for _ in range(n)]
    ys = [3.0 * x - 1.0 + rng.gauss(0, 0.1) for x in xs]
    cut = int(0.8 * n)
    return {"train": list(zip(xs[:cut], ys[:cut])), "test": list(zip(xs[cut:], ys[cut:]))}


@dagc.task(cpus="1", memory="1Gi", cost="50ms", pure=True)
def train(data: dict, lr: float, steps: int) -> dict:
    w, b = 0.0, 0.0
    for _ in range(steps):
        gw = sum(2 * (w * x + b - y) * x for x, y in data["train"]) / len(data["train"])
        gb = sum(2 * (w * x + b - y) for x, y in data["train"]) / len(data["train"])
        w, b = w - lr * gw, b - lr * gb
    return {"w": w, "b": b, "lr": lr}


@dagc.task(cost="10ms", pure=True)
def evaluate(model: dict, data: dict) -> float:
    err = sum((model["w"] * x + model["b"] - y) ** 2 for x, y in data["test"]) / len(data["test"])
    return round(err, 6) if math.isfinite(err) else float("inf")


@dagc.task(cost="5ms", pure=True)
def pick_best(models: list[dict], errors: list[float]) -> dict:
    best = min(range(len(models)), key=lambda i: errors[i])
    return {**models[best], "error": errors[best]}


@dagc.task(cost="20ms", pure=True)
def fine_tune(model: dict, data: dict, rounds: int) -> dict:
    """One more gradient step, at the tuning rate."""
    n, w, b = len(data["train"]), model["w"], model["b"]
    gw = sum(2 * (w * x + b - y) * x for x, y in data["train"]) / n
    gb = sum(2 * (w * x + b - y) for x, y in data["train"]) / n
    step = 0.25
    return {**model, "w": w - step * gw, "b": b - step * gb, "rounds": rounds}


@dagc.task(cost="5ms", pure=True)
def converged(before: float, after: float) -> bool:
    return abs(before - after) < 1e-4


@dagc.task(cost="5ms", pure=True)
def deploy(model: dict) -> str:
    return f"deployed w={model['w']:.3f} b={model['b']:.3f}"


@dagc.task(cost="5ms", pure=True)
def report(status: str, error: float) -> str:
    return f"{status}; test error {error:.5f}"


@dagc.task(cost="5ms", side_effects=True)
def notify(pipeline: str, seed: int) -> str:
    """The exit handler's step: in KFP it would post to a chat channel or clean up a bucket."""
    return f"{pipeline} (seed {seed}) finished"


@dagc.pipeline
def kfp_training(n: int = 200, seed: int = 3, threshold: float = 0.05):
    data = download(n, seed)
    models = [train(data, lr, 4) for lr in LEARNING_RATES]  # dsl.ParallelFor over a constant list
    errors = [evaluate(m, data) for m in models]
    best = pick_best(models, errors)
    error = best["error"]
    try:  # with dsl.ExitHandler(notify(...)): tuning and deployment, then the notice whatever happened
        for rounds in range(1, MAX_ROUNDS):  # tuning until the error stops moving
            best = fine_tune(best, data, rounds)
            new_error = evaluate(best, data)
            if converged(error, new_error):
                break
            error = new_error
        if error < threshold:  # dsl.If(...)
            status = deploy(best)
        else:
            status = "not deployed: error above threshold"
        summary = report(status, error)
    finally:
        notice = notify("kfp_training", seed)
    return summary, round(error, 6), best["rounds"], notice


if __name__ == "__main__":
    print(kfp_training())
