"""GPT-style pretraining, end to end, at toy scale.

synthetic corpus → byte-pair tokenizer training → tokenization shards (fan-out) → packing (fan-in)
→ training a tiny transformer as a 2-rank data-parallel (DDP) task → evaluation → export.

The training task asks `dagc.context()` for its rank, world size and process group: run by the Ray
or torch.distributed backend it is two processes averaging gradients with DDP; run as plain Python
it is one process that accumulates the same two half-batch gradients, so both give the same model.

Runs as plain Python (`python samples/gpt_pretrain.py`) in a few seconds on a CPU, and compiles
with `dagc compile samples/gpt_pretrain.py -o out` (try `--param n_shards=8`).
"""

from __future__ import annotations

import hashlib
import io
import math
import random
from collections import Counter

import torch
import torch.nn.functional as F

import dagc

torch.set_num_threads(1)  # tiny model: threads only add overhead, and one thread is deterministic
SEED = 3
RANKS = 2  # data-parallel ranks of the training task; the global batch is split into this many shards
EOS = "<eos>"
END = "</w>"

SUBJECTS = ["the cat", "a dog", "the model", "my friend", "the robot", "a bird", "the teacher", "our team"]
VERBS = ["sees", "likes", "trains", "finds", "follows", "builds", "reads", "paints"]
OBJECTS = ["the ball", "a tree", "the data", "a small house", "the river", "new music", "the garden", "a map"]
ENDINGS = ["today", "at night", "in the park", "very slowly", "again", "with care", "every day", "for fun"]


# ---- data ----------------------------------------------------------------------------------------
@dagc.task(cost="5s", out_size="2MiB")
def make_corpus(n_docs: int, seed: int) -> list[str]:
    """Documents of a few sentences from a small grammar, so that there is structure to learn."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sentences = []
        for _ in range(rng.randint(2, 5)):
            s, v, o = rng.randrange(8), rng.randrange(8), rng.randrange(8)
            # the ending is mostly determined by the verb: a pattern the model can pick up
            e = v if rng.random() < 0.8 else rng.randrange(8)
            sentences.append(f"{SUBJECTS[s]} {VERBS[v]} {OBJECTS[o]} {ENDINGS[e]} .")
        docs.append(" ".join(sentences))
    return docs


@dagc.task(cost="30s", out_size="16KiB", readonly=["corpus"])
def train_tokenizer(corpus: list[str], vocab_size: int) -> dict:
    """Byte-pair encoding over characters: merge the most frequent adjacent pair until the vocabulary
    has `vocab_size` entries (ties broken by the pair itself, so training is deterministic)."""
    words = Counter(w for doc in corpus for w in doc.split())
    splits = {w: [*w, END] for w in words}
    vocab = sorted({c for w in words for c in w} | {END, EOS})
    merges: list[tuple[str, str]] = []
    while len(vocab) < vocab_size:
        pairs: Counter = Counter()
        for w, parts in splits.items():
            for a, b in zip(parts, parts[1:]):
                pairs[a, b] += words[w]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab.append(best[0] + best[1])
        for w, parts in splits.items():
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    out.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            splits[w] = out
    return {"vocab": vocab, "merges": merges}


def encode_word(word: str, merges: list[tuple[str, str]]) -> list[str]:
    parts = [*word, END]
    for pair in merges:
        i, out = 0, []
        while i < len(parts):
            if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
                out.append(pair[0] + pair[1])
                i += 2
            else:
                out.append(parts[i])
                i += 1
        parts = out
    return parts


def decode(ids: list[int], tokenizer: dict) -> str:
    text = "".join(tokenizer["vocab"][i] for i in ids)
    return text.replace(END, " ").replace(EOS, " | ").strip()


@dagc.task(cost="20s", out_size="1MiB")
def tokenize(corpus: list[str], tokenizer: dict, shard: int, n_shards: int) -> torch.Tensor:
    """Token ids of every `n_shards`-th document starting at `shard`, each followed by <eos>."""
    index = {t: i for i, t in enumerate(tokenizer["vocab"])}
    cache: dict[str, list[int]] = {}
    ids: list[int] = []
    for doc in corpus[shard::n_shards]:
        for word in doc.split():
            if word not in cache:
                cache[word] = [index[t] for t in encode_word(word, tokenizer["merges"])]
            ids.extend(cache[word])
        ids.append(index[EOS])
    return torch.tensor(ids, dtype=torch.long)


@dagc.task(cost="5s", out_size="4MiB")
def pack(shards: list[torch.Tensor], seq_len: int) -> dict[str, torch.Tensor]:
    """Concatenate the shards and cut the stream into blocks of `seq_len + 1` tokens (inputs and
    next-token targets); the last tenth of the blocks is held out for validation."""
    stream = torch.cat(shards)
    n_blocks = len(stream) // (seq_len + 1)
    blocks = stream[: n_blocks * (seq_len + 1)].view(n_blocks, seq_len + 1)
    n_val = max(1, n_blocks // 10)
    return {"train": blocks[:-n_val], "val": blocks[-n_val:], "tokens": len(stream)}


# ---- model ---------------------------------------------------------------------------------------
class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int, seq_len: int, dim: int = 48, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(seq_len, dim)
        self.blocks = torch.nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))


def lm_loss(model: torch.nn.Module, blocks: torch.Tensor) -> torch.Tensor:
    logits = model(blocks[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), blocks[:, 1:].reshape(-1))


# ---- training, evaluation, export ----------------------------------------------------------------
@dagc.task(ranks=RANKS, cost="10m", memory="2GiB", out_size="512KiB", retries=1, readonly=["data"])
def train(data: dict[str, torch.Tensor], tokenizer: dict, steps: int, batch: int, lr: float) -> dict:
    """Data-parallel training: the global batch is split into RANKS shards. With RANKS processes each
    rank takes one shard and DDP averages the gradients; in one process, the shards' gradients are
    accumulated with the same weights. The task's result is rank 0's: the weights and the loss curve."""
    ctx = dagc.context()
    seq_len = data["train"].shape[1] - 1
    torch.manual_seed(SEED)
    model = TinyGPT(len(tokenizer["vocab"]), seq_len)
    net = model
    if ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, process_group=ctx.group)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    mine = range(ctx.rank, RANKS, ctx.world_size)  # the shards this process computes
    weight = 1.0 / len(mine)  # DDP divides by the world size; accumulation divides by the rest
    g = torch.Generator().manual_seed(SEED)
    losses = []
    for _ in range(steps):
        rows = torch.randint(len(data["train"]), (batch,), generator=g)
        shards = rows.view(RANKS, -1)
        opt.zero_grad()
        local = []
        for s in mine:
            loss = lm_loss(net, data["train"][shards[s]])
            (loss * weight).backward()
            local.append(loss.detach())
        if ctx.distributed:
            gathered = [torch.zeros(()) for _ in range(ctx.world_size)]
            torch.distributed.all_gather(gathered, local[0], group=ctx.group)
            local = gathered
        opt.step()
        losses.append(round(sum(float(v) for v in local) / RANKS, 4))
    if not ctx.is_main:
        return {}  # dropped: the task's result is rank 0's
    return {"state": model.state_dict(), "losses": losses, "seq_len": seq_len, "vocab": len(tokenizer["vocab"])}


@dagc.task(cost="20s", out_size="4KiB", pure=True)
def evaluate(trained: dict, data: dict[str, torch.Tensor], tokenizer: dict, prompt: str) -> dict:
    """Validation loss and perplexity, and a short greedy continuation of `prompt`."""
    model = TinyGPT(trained["vocab"], trained["seq_len"])
    model.load_state_dict(trained["state"])
    model.eval()
    with torch.no_grad():
        val = lm_loss(model, data["val"]).item()
        index = {t: i for i, t in enumerate(tokenizer["vocab"])}
        ids = [index[t] for w in prompt.split() for t in encode_word(w, tokenizer["merges"])]
        for _ in range(12):
            logits = model(torch.tensor([ids[-trained["seq_len"]:]]))
            ids.append(int(logits[0, -1].argmax()))
    return {"val_loss": round(val, 4), "perplexity": round(math.exp(val), 3), "sample": decode(ids, tokenizer)}


@dagc.task(cost="5s", out_size="4KiB", readonly=["trained", "tokenizer"])
def export(trained: dict, tokenizer: dict, metrics: dict, data: dict[str, torch.Tensor]) -> dict:
    """The deployable artefact (fp16 weights and the tokenizer, serialized) and a summary of the run."""
    state = {k: v.half() for k, v in trained["state"].items()}
    buffer = io.BytesIO()
    torch.save({"state": state, "tokenizer": tokenizer}, buffer)
    digest = hashlib.sha256()
    for k in sorted(state):
        digest.update(k.encode())
        digest.update(state[k].numpy().tobytes())
    losses = trained["losses"]
    return {
        "vocab": len(tokenizer["vocab"]),
        "tokens": data["tokens"],
        "params": sum(v.numel() for v in state.values()),
        "artifact_bytes": len(buffer.getvalue()),
        "weights_sha256": digest.hexdigest()[:16],
        "first_loss": losses[0],
        "final_loss": losses[-1],
        **metrics,
    }


@dagc.pipeline
def gpt_pretrain(n_docs: int = 600, vocab_size: int = 96, n_shards: int = 4, seq_len: int = 32,
                 steps: int = 80, batch: int = 16, lr: float = 0.003):
    corpus = make_corpus(n_docs, seed=SEED)
    tokenizer = train_tokenizer(corpus, vocab_size)
    shards = [tokenize(corpus, tokenizer, shard=i, n_shards=n_shards) for i in range(n_shards)]
    data = pack(shards, seq_len)
    trained = train(data, tokenizer, steps=steps, batch=batch, lr=lr)
    metrics = evaluate(trained, data, tokenizer, prompt="the robot builds")
    return export(trained, tokenizer, metrics, data)


if __name__ == "__main__":
    print(gpt_pretrain())
