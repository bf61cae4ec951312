"""Pipeline-parallel training of a small transformer, written so that the compiler sees every layer.

    embedding → N_BLOCKS transformer blocks → head (next-token loss)

Each training step splits the batch into N_MICRO micro-batches. Every (micro-batch, layer) forward
and backward is a task, and each layer's update sums its gradients over the micro-batches, as GPipe
does. The compiler sees the layers and the micro-batches, so placing consecutive layers on
consecutive devices (`dagc plan … --cluster 4`, or the `stages` pass) turns the graph into a
pipeline: micro-batch m+1 runs through block 0 while micro-batch m is in block 1. Backward passes
recompute their layer's forward from its input (activation recomputation), so only layer inputs
travel between stages.

The per-micro-batch losses average to the loss that single-process training of the whole model on the
whole batch gives: `single_process_losses()` below trains it the ordinary way, and the two agree to
1e-5.

Runs as plain Python (`python samples/pipeline_parallel.py`) in a few seconds on a CPU, and compiles
with `dagc compile samples/pipeline_parallel.py -o out`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import dagc

torch.set_num_threads(1)  # tiny layers: threads only add overhead, and one thread is deterministic
SEED = 17
VOCAB, DIM, HEADS, SEQ = 32, 32, 4, 16
N_BLOCKS = 3
N_MICRO = 4
STEPS = 3


# ---- the layers ----------------------------------------------------------------------------------
class Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, DIM)
        self.pos = torch.nn.Embedding(SEQ, DIM)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.proj = torch.nn.Linear(DIM, DIM)
        self.ln2 = torch.nn.LayerNorm(DIM)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(DIM)
        self.out = torch.nn.Linear(DIM, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


LAYERS = {"embed": Embed, "block": Block, "head": Head}


def build(kind: str, index: int, seed: int) -> torch.nn.Module:
    """Layer `index` of the model, initialised from its own seed (so every process builds the same one)."""
    torch.manual_seed(seed * 1000 + index)
    return LAYERS[kind]()


def load(kind: str, params: dict[str, torch.Tensor]) -> torch.nn.Module:
    layer = LAYERS[kind]()
    layer.load_state_dict(params)
    return layer


def next_token_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


# ---- tasks ---------------------------------------------------------------------------------------
@dagc.task(cost="500ms", out_size="64KiB")
def make_data(n: int, seed: int) -> torch.Tensor:
    """Sequences of a noisy affine recurrence mod VOCAB: each token mostly follows from the one before."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.zeros(n, SEQ + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(VOCAB, (n,), generator=g)
    for t in range(1, SEQ + 1):
        noise = torch.randint(VOCAB, (n,), generator=g)
        keep = torch.rand(n, generator=g) < 0.9
        tokens[:, t] = torch.where(keep, (tokens[:, t - 1] * 5 + 3) % VOCAB, noise)
    return tokens


@dagc.task(cost="200ms", out_size="32KiB")
def init_layer(kind: str, index: int, seed: int) -> dict[str, torch.Tensor]:
    return build(kind, index, seed).state_dict()


@dagc.task(cost="10ms", out_size="4KiB")
def micro_batch(data: torch.Tensor, step: int, m: int, batch: int) -> torch.Tensor:
    """Micro-batch m of the batch of step `step` (batches cycle through the data)."""
    start = (step * batch) % len(data)
    rows = data[start : start + batch]
    size = batch // N_MICRO
    return rows[m * size : (m + 1) * size]


@dagc.task(cost="100ms", out_size="16KiB", pure=True)
def embed_forward(params: dict[str, torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return load("embed", params)(tokens[:, :-1])


@dagc.task(cost="1s", out_size="16KiB", pure=True)
def block_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return load("block", params)(x)


@dagc.task(cost="300ms", out_size="48KiB", pure=True)
def head_forward_backward(params: dict[str, torch.Tensor], x: torch.Tensor,
                          tokens: torch.Tensor) -> tuple[float, torch.Tensor, dict[str, torch.Tensor]]:
    """The micro-batch's loss, its gradient w.r.t. the head's input and the head's gradients, scaled by
    1/N_MICRO so that summing over micro-batches gives the gradient of the whole batch's mean loss."""
    head = load("head", params)
    x = x.detach().requires_grad_()
    loss = next_token_loss(head(x), tokens)
    (loss / N_MICRO).backward()
    return loss.item(), x.grad, {k: p.grad for k, p in head.named_parameters()}


@dagc.task(cost="2s", out_size="48KiB", pure=True)
def block_backward(params: dict[str, torch.Tensor], x: torch.Tensor,
                   grad_out: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Recompute the block's forward from its input, then backpropagate `grad_out` through it."""
    block = load("block", params)
    x = x.detach().requires_grad_()
    block(x).backward(grad_out)
    return x.grad, {k: p.grad for k, p in block.named_parameters()}


@dagc.task(cost="200ms", out_size="32KiB", pure=True)
def embed_backward(params: dict[str, torch.Tensor], tokens: torch.Tensor,
                   grad_out: torch.Tensor) -> dict[str, torch.Tensor]:
    embed = load("embed", params)
    embed(tokens[:, :-1]).backward(grad_out)
    return {k: p.grad for k, p in embed.named_parameters()}


@dagc.task(cost="400ms", out_size="32KiB")
def update(params: dict[str, torch.Tensor], grads: list[dict], lr: float) -> dict[str, torch.Tensor]:
    """SGD step with the layer's gradients summed over the micro-batches (in micro-batch order)."""
    new = {}
    for k, value in params.items():
        total = grads[0][k].clone()
        for g in grads[1:]:
            total += g[k]
        new[k] = value - lr * total
    return new


@dagc.task(cost="10ms")
def step_loss(losses: list[float]) -> float:
    """The batch's mean loss: the mean of its equal-sized micro-batches' losses."""
    return sum(losses) / len(losses)


@dagc.task(cost="10ms")
def summarize(losses: list[float], embed: dict, blocks: list[dict], head: dict) -> dict:
    """The loss of every step, and a checksum of every layer's trained weights."""
    layers = [embed, *blocks, head]
    return {"losses": [round(v, 6) for v in losses],
            "weight_sums": [round(sum(v.abs().sum().item() for v in layer.values()), 3) for layer in layers]}


@dagc.pipeline
def pipeline_parallel(n: int = 256, batch: int = 32, lr: float = 0.3):
    data = make_data(n, seed=SEED)
    embed = init_layer("embed", 0, SEED)
    blocks = [init_layer("block", 1 + i, SEED) for i in range(N_BLOCKS)]
    head = init_layer("head", 1 + N_BLOCKS, SEED)
    losses = []
    for step in range(STEPS):
        step_losses = []
        embed_grads, head_grads = [], []
        block_grads = [[] for _ in range(N_BLOCKS)]
        for m in range(N_MICRO):
            tokens = micro_batch(data, step, m, batch)
            x = embed_forward(embed, tokens)
            inputs = []
            for i in range(N_BLOCKS):  # forward through the blocks, remembering each block's input
                inputs = inputs + [x]
                x = block_forward(blocks[i], x)
            loss, grad, g_head = head_forward_backward(head, x, tokens)
            grads = []
            for i in range(N_BLOCKS - 1, -1, -1):  # backward through the blocks, last to first
                grad, g_block = block_backward(blocks[i], inputs[i], grad)
                grads = [g_block] + grads
            g_embed = embed_backward(embed, tokens, grad)
            step_losses = step_losses + [loss]
            head_grads = head_grads + [g_head]
            embed_grads = embed_grads + [g_embed]
            block_grads = [block_grads[i] + [grads[i]] for i in range(N_BLOCKS)]
        embed = update(embed, embed_grads, lr)
        blocks = [update(blocks[i], block_grads[i], lr) for i in range(N_BLOCKS)]
        head = update(head, head_grads, lr)
        losses = losses + [step_loss(step_losses)]
    return summarize(losses, embed, blocks, head)


def single_process_losses(n: int = 256, batch: int = 32, lr: float = 0.3) -> list[float]:
    """The same training, the ordinary way: one model, the whole batch, one backward per step."""
    data = make_data(n, SEED)
    model = torch.nn.Sequential(build("embed", 0, SEED), *[build("block", 1 + i, SEED) for i in range(N_BLOCKS)],
                                build("head", 1 + N_BLOCKS, SEED))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(STEPS):
        start = (step * batch) % len(data)
        tokens = data[start : start + batch]
        opt.zero_grad()
        loss = next_token_loss(model(tokens[:, :-1]), tokens)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    print(pipeline_parallel())
    print("single process:", [round(v, 6) for v in single_process_losses()])
