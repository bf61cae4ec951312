"""Mixed-precision training step of a small MLP, written as a per-layer DAG.

    fp32 master weights ─cast→ fp16 weights ─→ forward, layer by layer, in fp16
    → loss (scaled) → backward, layer by layer → per layer: fp32 master-weight update → cast to fp16

Each layer's update depends only on that layer's gradient, so the compiler can run the update of
layer i while the backward pass is still working on layers i-1 … 0, and run several updates at once:
`dagc plan samples/mixed_precision_step.py --cluster 4` shows them in parallel. The master update
stays in fp32; the updated weights move to the rank that casts them in 16 bits (docs/annotations.md,
`compress`), and the fp32 master weights read on three or more ranks move by one broadcast.

Runs as plain Python (`python samples/mixed_precision_step.py`) in about a second on a CPU, and
compiles with `dagc compile samples/mixed_precision_step.py -o out` without being imported or run.
"""

from __future__ import annotations

import torch

import dagc

torch.set_num_threads(1)  # tiny layers: threads only add overhead, and one thread is deterministic
SEED = 5
WIDTHS = [32, 64, 64, 64, 10]  # input, three hidden layers, ten classes
N_LAYERS = 4


@dagc.task(cost="200ms", out_size="16KiB")
def make_batch(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of a synthetic 10-class problem (labels from a fixed random teacher)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, WIDTHS[0], generator=g)
    teacher = torch.randn(WIDTHS[0], WIDTHS[-1], generator=g)
    return x, (x @ teacher).argmax(1)


@dagc.task(cost="500ms", out_size="64KiB")
def init_master(seed: int) -> list[dict[str, torch.Tensor]]:
    """fp32 master weights of every layer (Kaiming-uniform, as torch.nn.Linear)."""
    g = torch.Generator().manual_seed(seed)
    layers = []
    for fan_in, fan_out in zip(WIDTHS[:-1], WIDTHS[1:]):
        bound = fan_in**-0.5
        layers.append({"w": (torch.rand(fan_out, fan_in, generator=g) * 2 - 1) * bound,
                       "b": (torch.rand(fan_out, generator=g) * 2 - 1) * bound})
    return layers


@dagc.task(cost="100ms", out_size="8KiB")
def cast_layer(master: list[dict[str, torch.Tensor]], i: int) -> dict[str, torch.Tensor]:
    """The fp16 working copy of layer i."""
    return {k: v.half() for k, v in master[i].items()}


@dagc.task(cost="1s", out_size="16KiB")
def forward(layer: dict[str, torch.Tensor], x: torch.Tensor, relu: bool) -> tuple[torch.Tensor, dict]:
    """fp16 forward of one layer; returns its output and what its backward needs (the tape)."""
    x = x.half()
    out = x @ layer["w"].t() + layer["b"]
    if relu:
        out = torch.relu(out)
    return out, {"x": x, "w": layer["w"], "out": out, "relu": relu}


@dagc.task(cost="200ms", out_size="4KiB", readonly=["logits"])
def loss_and_grad(logits: torch.Tensor, y: torch.Tensor, loss_scale: float) -> tuple[float, torch.Tensor]:
    """Cross-entropy (computed in fp32) and its scaled gradient w.r.t. the fp16 logits."""
    z = logits.float().requires_grad_()
    loss = torch.nn.functional.cross_entropy(z, y)
    (grad,) = torch.autograd.grad(loss * loss_scale, z)
    return round(loss.item(), 5), grad.half()


@dagc.task(cost="1s", out_size="16KiB")
def backward(tape: dict, grad_out: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """fp16 backward of one layer: the gradient for the layer below and this layer's (scaled) gradient."""
    if tape["relu"]:
        grad_out = grad_out * (tape["out"] > 0).half()
    grads = {"w": grad_out.t() @ tape["x"], "b": grad_out.sum(0)}
    return grad_out @ tape["w"], grads


# The new master weights travel in fp16 (`compress="fp16"`): their only reader, `cast_half`, casts them
# to fp16 itself, so the compiled program computes exactly what the plain run does with half the bytes.
@dagc.task(cost="3s", out_size="32KiB", compress="fp16")
def update(master: list[dict[str, torch.Tensor]], i: int, grads: dict[str, torch.Tensor], lr: float,
           loss_scale: float) -> dict:
    """fp32 master-weight update of layer i: unscale, skip on overflow, SGD with weight decay."""
    unscaled = {k: g.float() / loss_scale for k, g in grads.items()}
    finite = all(bool(torch.isfinite(g).all()) for g in unscaled.values())
    new = {k: v.clone() for k, v in master[i].items()}
    if finite:
        for k, g in unscaled.items():
            new[k] -= lr * (g + 1e-4 * new[k])
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in unscaled.values())).item()
    return {"layer": i, "master": new, "grad_norm": round(norm, 5), "skipped": not finite}


@dagc.task(cost="100ms", out_size="8KiB", pure=True)
def cast_half(updated: dict) -> dict:
    """The new fp16 working copy, cast from the updated master weights."""
    return {"layer": updated["layer"], "half": {k: v.half() for k, v in updated["master"].items()},
            "grad_norm": updated["grad_norm"], "skipped": updated["skipped"]}


@dagc.task(cost="500ms", pure=True)
def summarize(loss: float, layers: list[dict], input_grad: torch.Tensor, loss_scale: float, x: torch.Tensor,
              y: torch.Tensor) -> dict:
    """Loss before and after the step (fp16 forward with the new weights), per-layer figures, and the
    size of the loss's gradient w.r.t. the input (unscaled)."""
    h = x.half()
    for j, layer in enumerate(layers):
        h = h @ layer["half"]["w"].t() + layer["half"]["b"]
        if j < len(layers) - 1:
            h = torch.relu(h)
    after = torch.nn.functional.cross_entropy(h.float(), y).item()
    return {
        "loss": loss,
        "loss_after": round(after, 5),
        "input_grad_norm": round(input_grad.float().norm().item() / loss_scale, 5),
        "grad_norms": [layer["grad_norm"] for layer in layers],
        "skipped": [layer["skipped"] for layer in layers],
        "weight_sums": [round(layer["half"]["w"].float().abs().sum().item(), 3) for layer in layers],
    }


@dagc.pipeline
def mixed_precision_step(batch: int = 256, lr: float = 0.5, loss_scale: float = 1024.0):
    x, y = make_batch(batch, seed=SEED)
    master = init_master(seed=SEED)
    h = x
    tapes = []
    for i in range(N_LAYERS):  # forward, layer by layer, in fp16
        weights = cast_layer(master, i)
        h, tape = forward(weights, h, relu=i < N_LAYERS - 1)
        tapes = tapes + [tape]
    loss, grad = loss_and_grad(h, y, loss_scale)
    layers = []
    for i in range(N_LAYERS - 1, -1, -1):  # backward; each layer's update needs only its own gradient
        grad, grads = backward(tapes[i], grad)
        updated = update(master, i, grads, lr, loss_scale)
        layers = [cast_half(updated)] + layers
    return summarize(loss, layers, grad, loss_scale, x, y)


if __name__ == "__main__":
    print(mixed_precision_step())
