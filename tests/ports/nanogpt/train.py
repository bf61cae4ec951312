"""nanoGPT's `train.py` (karpathy/nanoGPT), ported to dagc (a synthetic token stream, a tiny GPT, CPU).

Kept as the original writes it: the config as module-level constants, `from model import GPTConfig, GPT`,
`torch.manual_seed(1337 + seed_offset)`, `ctx = nullcontext()`, `get_batch(split)` drawing batch offsets
from the global generator, `model_args`, the model and `optimizer = model.configure_optimizers(...)` built
at module level, `estimate_loss()` under `@torch.no_grad()` reading the module-level model, `get_lr(it)`
(warm-up then cosine decay), and the training loop: `while True:`, the learning rate set each iteration,
an evaluation every `eval_interval` iterations that keeps the best validation loss, the micro-steps that
fetch the next batch while the loss of this one is backpropagated, gradient clipping, the log every
`log_interval` iterations, `iter_num += 1`, `if iter_num > max_iters: break`.
Changed: the loop is the body of the pipeline `main()`, so what it did with the model and the optimizer
is in tasks (`set_lr(lr)`, `forward_backward(X, Y)`, `step()`, `estimate_loss()`); the data are a synthetic
token stream in memory instead of `np.memmap` files; no DDP, GradScaler, torch.compile, wandb, checkpoints
or configurator.py overrides, and no timing (`time.time()` is not known when the pipeline is compiled);
`main` returns the evaluations and the best validation loss. Two lines are written as dagc compiles them
now: `if decay_lr: lr = get_lr(iter_num)` / `else: lr = learning_rate` for the original's conditional
expression, and the logs' f-strings split where a loop counter meets a task result (the original forms
are in tests/test_training_ports.py AS_WRITTEN).
"""

import math
from contextlib import nullcontext

import numpy as np
import torch
from model import GPT, GPTConfig

import dagc

# -----------------------------------------------------------------------------
# default config values, shrunk to train a tiny model on a synthetic stream in about a second
# I/O
eval_interval = 2
log_interval = 2
eval_iters = 2
eval_only = False  # if True, script exits right after the first eval
always_save_checkpoint = False  # if True, always save a checkpoint after each eval
# data
dataset = 'synthetic'
gradient_accumulation_steps = 2  # used to simulate larger batch sizes
batch_size = 4  # if gradient_accumulation_steps > 1, this is the micro-batch size
block_size = 8
# model
n_layer = 1
n_head = 2
n_embd = 16
dropout = 0.0  # for pretraining 0 is good, for finetuning try 0.1+
bias = False  # do we use bias inside LayerNorm and Linear layers?
# adamw optimizer
learning_rate = 1e-2  # max learning rate
max_iters = 4  # total number of training iterations
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0  # clip gradients at this value, or disable if == 0.0
# learning rate decay settings
decay_lr = True  # whether to decay the learning rate
warmup_iters = 1  # how many steps to warm up for
lr_decay_iters = 4  # should be ~= max_iters per Chinchilla
min_lr = 1e-3  # minimum learning rate, should be ~= learning_rate/10 per Chinchilla
# system
device = 'cpu'  # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps' on macbooks
# -----------------------------------------------------------------------------

master_process = True
seed_offset = 0
ddp_world_size = 1
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
print(f"tokens per iteration will be: {tokens_per_iter:,}")

torch.manual_seed(1337 + seed_offset)
device_type = 'cuda' if 'cuda' in device else 'cpu'  # for later use in torch.autocast
ctx = nullcontext()

# poor man's data loader: a token stream where each token mostly follows its predecessor + 1
vocab_size = 32
_rng = np.random.default_rng(0)
_stream = np.cumsum(np.where(_rng.random(2000) < 0.8, 1, _rng.integers(0, vocab_size, 2000))) % vocab_size
train_data = _stream[:1800].astype(np.uint16)
val_data = _stream[1800:].astype(np.uint16)


def get_batch(split):
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y


# model init
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size,
                  bias=bias, vocab_size=vocab_size, dropout=dropout)
print("Initializing a new model from scratch")
gptconf = GPTConfig(**model_args)
model = GPT(gptconf)
model.to(device)

# optimizer
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)


# helps estimate an arbitrarily accurate loss over either split using many batches
@dagc.task
@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


# learning rate decay scheduler (cosine with warmup)
def get_lr(it):
    # 1) linear warmup for warmup_iters steps
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    # 2) if it > lr_decay_iters, return min learning rate
    if it > lr_decay_iters:
        return min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
    return min_lr + coeff * (learning_rate - min_lr)


@dagc.task
def set_lr(lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


@dagc.task
def forward_backward(X, Y):
    with ctx:
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps  # scale the loss to account for gradient accumulation
    loss.backward()
    return loss.item()


@dagc.task
def step():
    # clip the gradient
    if grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    # flush the gradients as soon as we can, no need for this memory anymore
    optimizer.zero_grad(set_to_none=True)


@dagc.pipeline
def main():
    # init these up here, can override if init_from='resume' (i.e. from a checkpoint)
    iter_num = 0
    best_val_loss = 1e9
    evals = []

    # training loop
    X, Y = get_batch('train')  # fetch the very first batch
    local_iter_num = 0  # number of iterations in the lifetime of this process
    while True:

        # determine and set the learning rate for this iteration
        if decay_lr:
            lr = get_lr(iter_num)
        else:
            lr = learning_rate
        set_lr(lr)

        # evaluate the loss on train/val sets and write checkpoints
        if iter_num % eval_interval == 0 and master_process:
            losses = estimate_loss()
            print(f"step {iter_num}:", f"train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            evals.append(losses)
            if losses['val'] < best_val_loss or always_save_checkpoint:
                best_val_loss = losses['val']
        if iter_num == 0 and eval_only:
            break

        # forward backward update, with optional gradient accumulation to simulate larger batch size
        for micro_step in range(gradient_accumulation_steps):  # noqa: B007
            loss = forward_backward(X, Y)
            # immediately async prefetch next batch while model is doing the forward pass on the GPU
            X, Y = get_batch('train')
        step()

        # logging
        if iter_num % log_interval == 0 and master_process:
            # get loss as float. scale up to undo the division above
            lossf = loss * gradient_accumulation_steps
            print(f"iter {iter_num}:", f"loss {lossf:.4f}")
        iter_num += 1
        local_iter_num += 1

        # termination conditions
        if iter_num > max_iters:
            break
    return evals, best_val_loss


if __name__ == '__main__':
    main()
