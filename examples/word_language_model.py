"""A 2-layer LSTM word language model (the PyTorch example's architecture) on a tiny synthetic
corpus, with gradient clipping and truncated back-propagation through time.

Run: python examples/word_language_model.py
"""
import math

import numpy as np

import ember as torch
from ember import nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.ntoken = ntoken
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, input, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        return self.decoder(self.drop(out)).view(-1, self.ntoken), hidden


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    ntoken, bptt, batch = 50, 20, 16
    corpus = (np.arange(20000) * 7 + rng.integers(0, 3, 20000)) % ntoken  # learnable pattern
    data = torch.tensor(corpus[: len(corpus) // batch * batch].reshape(batch, -1).T.copy())
    model = RNNModel(ntoken, 64, 64, 2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    hidden = None
    for i, start in enumerate(range(0, data.shape[0] - 1 - bptt, bptt)):
        x, y = data[start:start + bptt], data[start + 1:start + 1 + bptt]
        if hidden is not None:
            hidden = tuple(h.detach() for h in hidden)
        opt.zero_grad()
        logits, hidden = model(x, hidden)
        loss = nn.functional.cross_entropy(logits, y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        if i % 20 == 0:
            print(f"batch {i:3d}  loss {loss.item():.3f}  ppl {math.exp(loss.item()):8.2f}")


if __name__ == "__main__":
    main()
