"""Data-parallel SGD with an all-reduce: every worker keeps its own copy of the weights, the
workers' gradients are added on all of them at once, and each worker takes the same step.

    shard[i], w[i] ─→ grad[i] ─→ g = grad[0] + grad[1] + grad[2] + grad[3] ─→ w[i] = step(w[i], g) ─→ …

The same training written with a parameter server is `samples/sgd_param_server.py`; both compute
the same weights. On the torch backend the sum `g` becomes one all-reduce collective over the
workers' ranks (the `comm` pass; a DAGC311 warning says that its additions may run in another order
than Python's, so the weights may differ from the plain run's in their last bits: the figures this
sample reports are rounded to 6 decimals). `dagc plan` estimates which form is faster on a cluster:

    dagc plan samples/sgd_allreduce.py --cluster 5 --link-bandwidth 1GB/s

Runs as plain Python in about a second.
"""

from __future__ import annotations

import torch

import dagc

torch.set_num_threads(1)  # small matrices: one thread is deterministic and no slower
WORKERS = 4
DIM = 1 << 20  # weights: 8 MiB of float64: communication dominates
ROWS = 2  # examples per worker and step


@dagc.task(cost="200ms", out_size="16MiB", pure=True)
def make_shard(worker: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Worker `worker`'s examples of a synthetic linear-regression problem (float64)."""
    g = torch.Generator().manual_seed(seed)
    truth = torch.randn(DIM, generator=g, dtype=torch.float64) / DIM**0.5
    g.manual_seed(seed * 1000 + worker + 1)
    x = torch.randn(ROWS, DIM, generator=g, dtype=torch.float64)
    return x, x @ truth + 0.01 * torch.randn(ROWS, generator=g, dtype=torch.float64)


@dagc.task(cost="5ms", out_size="8MiB", pure=True)
def init_weights(seed: int) -> torch.Tensor:
    return torch.zeros(DIM, dtype=torch.float64)


@dagc.task(cost="10ms", out_size="8MiB", pure=True)
def grad(w: torch.Tensor, shard: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Gradient of the mean squared error on one worker's examples."""
    x, y = shard
    return x.t() @ (x @ w - y) * (2.0 / ROWS)


@dagc.task(cost="5ms", out_size="8MiB", readonly=["w", "total"])  # not pure: each worker steps its own replica
def sgd_step(w: torch.Tensor, total: torch.Tensor, lr: float) -> torch.Tensor:
    """One SGD step with the mean of the workers' gradients (their sum, over the worker count)."""
    return w - lr * (total / WORKERS)


@dagc.task(cost="50ms", pure=True)
def summarize(ws: list[torch.Tensor], shards: list[tuple[torch.Tensor, torch.Tensor]]) -> dict:
    """Training loss over all workers' examples and the weights' norm (rounded: the figures a run
    reports), and whether every worker ended with the same weights."""
    w = ws[0]
    losses = [float(((x @ w - y) ** 2).mean()) for x, y in shards]
    return {"loss": round(sum(losses) / len(losses), 6), "w_norm": round(float(w.norm()), 9),
            "replicas_agree": all(bool(torch.equal(v, w)) for v in ws)}


@dagc.pipeline
def sgd_allreduce(steps: int = 3, lr: float = 4e-7, seed: int = 0) -> dict:
    shards = [make_shard(i, seed) for i in range(WORKERS)]
    w = init_weights(seed)
    ws = [w, w, w, w]  # each worker's replica
    for _ in range(steps):
        grads = [grad(ws[i], shards[i]) for i in range(WORKERS)]
        g = sum(grads)  # an all-reduce on the torch backend
        ws = [sgd_step(ws[i], g, lr) for i in range(WORKERS)]
    return summarize(ws, shards)


if __name__ == "__main__":
    print(sgd_allreduce())
