"""pytorch/examples `word_language_model/main.py`, ported to dagc (synthetic corpus, tiny sizes).

Kept as the original writes it: `args = parser.parse_args()` and `torch.manual_seed(args.seed)` at module
level, a module-level `device` and `criterion = nn.NLLLoss()`, an `RNNModel` class with `init_hidden`,
`repackage_hidden`, `train()` that updates the model in place and returns nothing, gradient clipping and
the hand-written SGD step `p.data.add_(p.grad, alpha=-lr)`, and the learning rate annealed by a factor
of 4 when the validation loss does not improve. Changed: the functions take the model and data as
arguments instead of reading globals and are dagc tasks; `main` is the pipeline, and takes as
parameters the settings its own body reads (the tasks still read `args`).
"""

import argparse
import math

import torch
import torch.nn as nn

import dagc

parser = argparse.ArgumentParser(description="PyTorch RNN/LSTM Language Model (synthetic corpus)")
parser.add_argument("--emsize", type=int, default=16, help="size of word embeddings")
parser.add_argument("--nhid", type=int, default=16, help="number of hidden units per layer")
parser.add_argument("--nlayers", type=int, default=2, help="number of layers")
parser.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
parser.add_argument("--batch_size", type=int, default=4, metavar="N", help="batch size")
parser.add_argument("--bptt", type=int, default=8, help="sequence length")
parser.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers")
parser.add_argument("--seed", type=int, default=1111, help="random seed")
parser.add_argument("--log-interval", type=int, default=4, metavar="N", help="report interval")
args = parser.parse_args()

# Set the random seed manually for reproducibility.
torch.manual_seed(args.seed)
device = torch.device("cpu")
criterion = nn.NLLLoss()
NTOKENS = 50


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid = nhid
        self.nlayers = nlayers

    def forward(self, input, hidden):  # noqa: A002 - the original's name
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return torch.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source: torch.Tensor, i: int):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


@dagc.task(cost="1s")
def corpus(n_tokens: int, seed: int) -> dict:
    """A synthetic corpus with some structure (each token tends to follow its predecessor + 1)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(n_tokens, dtype=torch.long)
    for i in range(1, n_tokens):
        ids[i] = (ids[i - 1] + 1) % NTOKENS if torch.rand(1, generator=g).item() < 0.8 else \
            torch.randint(NTOKENS, (1,), generator=g).item()
    split = int(n_tokens * 0.8)
    return {"train": ids[:split], "valid": ids[split:]}


@dagc.task(cost="10ms")
def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    return data.view(bsz, -1).t().contiguous().to(device)


@dagc.task(cost="100ms")
def build_model() -> RNNModel:
    return RNNModel(NTOKENS, args.emsize, args.nhid, args.nlayers, args.dropout).to(device)


@dagc.task(cost="5s")
def train(model: RNNModel, train_data: torch.Tensor, lr: float, epoch: int) -> None:
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            print(f"| epoch {epoch:3d} | {batch:5d} batches | lr {lr:02.2f} | loss {cur_loss:5.2f}")
            total_loss = 0


@dagc.task(cost="1s")
def evaluate(model: RNNModel, data_source: torch.Tensor) -> float:
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(args.batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return round(total_loss / (len(data_source) - 1), 5)


@dagc.task(cost="10ms")
def anneal(lr: float, val_loss: float, best_val_loss: float) -> float:
    # Anneal the learning rate if no improvement has been seen in the validation dataset.
    return lr if val_loss < best_val_loss else lr / 4.0


@dagc.pipeline
def main(n_tokens: int = 400, seed: int = 7, batch_size: int = 4, lr: float = 20.0, epochs: int = 3):
    data = corpus(n_tokens, seed)
    train_data = batchify(data["train"], batch_size)
    val_data = batchify(data["valid"], batch_size)
    model = build_model()
    best_val_loss = math.inf
    history = []
    for epoch in range(1, epochs + 1):
        train(model, train_data, lr, epoch)
        val_loss = evaluate(model, val_data)
        history.append(val_loss)
        lr = anneal(lr, val_loss, best_val_loss)
        best_val_loss = min(best_val_loss, val_loss)
    return history, lr


if __name__ == "__main__":
    print(main())
