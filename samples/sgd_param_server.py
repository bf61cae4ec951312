"""Data-parallel SGD with a parameter server: workers compute gradients, one server task adds them
and updates the weights, and every worker reads the new weights for the next step.

    shard[i] ──┐
    w ─────────┼─→ grad[i] (4 workers) ─→ server_update(w, [grad…]) ─→ w ─→ … (steps)

The same training written with an all-reduce is `samples/sgd_allreduce.py`; both compute the same
weights. `dagc plan` estimates which is faster on a cluster (docs/torch_backend.md, "Parameter
server or all-reduce"):

    dagc plan samples/sgd_param_server.py --cluster 5 --link-bandwidth 1GB/s
    dagc plan samples/sgd_allreduce.py --cluster 5 --link-bandwidth 1GB/s

On the torch backend the server's rank receives every worker's gradient (four messages), and the
new weights go to the workers by one broadcast. Runs as plain Python in about a second.
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


@dagc.task(cost="5ms", out_size="8MiB", pure=True)
def server_update(w: torch.Tensor, grads: list[torch.Tensor], lr: float) -> torch.Tensor:
    """The parameter server: the mean of the workers' gradients, one SGD step."""
    total = grads[0]
    for g in grads[1:]:
        total = total + g
    return w - lr * (total / len(grads))


@dagc.task(cost="50ms", pure=True)
def summarize(w: torch.Tensor, shards: list[tuple[torch.Tensor, torch.Tensor]]) -> dict:
    """Training loss over all workers' examples, and the weights' norm (rounded: the figures a run reports)."""
    losses = [float(((x @ w - y) ** 2).mean()) for x, y in shards]
    return {"loss": round(sum(losses) / len(losses), 6), "w_norm": round(float(w.norm()), 9),
            "replicas_agree": True}  # one copy of the weights, on the server


@dagc.pipeline
def sgd_param_server(steps: int = 3, lr: float = 4e-7, seed: int = 0) -> dict:
    shards = [make_shard(i, seed) for i in range(WORKERS)]
    w = init_weights(seed)
    for _ in range(steps):
        grads = [grad(w, shards[i]) for i in range(WORKERS)]  # the workers
        w = server_update(w, grads, lr)  # the parameter server
    return summarize(w, shards)


if __name__ == "__main__":
    print(sgd_param_server())
