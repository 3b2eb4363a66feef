"""Models the ember.compile tests share (tests/compiler)."""
import math

import ember.nn as nn
import ember.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.reshape(x.shape[0], -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet5Flatten(LeNet5):
    """LeNet5 flattening with ``flatten(1)`` instead of a reshape by the batch size."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class WordLM(nn.Module):
    """examples/word_language_model.py's RNNModel (LSTM) at small widths: embedding, dropout,
    a 2-layer LSTM with dropout between layers, dropout, decoder; ``forward(input, hidden)``
    with ``input`` (seq, batch) returns the log-probabilities and the new hidden state."""

    def __init__(self, ntoken=11, ninp=8, nhid=12, nlayers=2, dropout=0.2):
        super().__init__()
        self.ntoken, self.nlayers, self.nhid = ntoken, nlayers, nhid
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


class GPTBlock(nn.Module):
    """benchmarks/gpt_step.py's pre-LayerNorm block (masked-softmax attention, exact GELU MLP)
    with dropout on the attention weights and both residual branches, as nanoGPT."""

    def __init__(self, n_embd, n_head, block, dropout):
        super().__init__()
        import ember
        self.n_embd, self.n_head = n_embd, n_head
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.fc2 = nn.Linear(4 * n_embd, n_embd)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("bias", ember.tril(ember.ones(block, block)).view(1, 1, block,
                                                                              block))

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_head
        q, k, v = self.attn(self.ln1(x)).split(self.n_embd, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = self.attn_drop(F.softmax(a, dim=-1)) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.resid_drop(self.proj(y))
        return x + self.resid_drop(self.fc2(F.gelu(self.fc(self.ln2(x)))))


class GPT(nn.Module):
    """A small GPT: token and position embeddings, a stack of ``GPTBlock`` with dropout, final
    LayerNorm and an untied head; ``forward(idx, targets)`` returns the cross-entropy loss."""

    def __init__(self, vocab=13, n_embd=16, n_head=2, block=8, n_layer=2, dropout=0.1):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([GPTBlock(n_embd, n_head, block, dropout)
                                     for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, targets):
        import ember
        B, T = idx.shape
        x = self.drop(self.wte(idx) + self.wpe(ember.arange(T)))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-BN-ReLU-conv-BN plus the identity (or a strided 1x1 conv-BN
    projection), ReLU."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.short is None else self.short(x)))


class ResNetBN(nn.Module):
    """A small ResNet: a conv-BN-ReLU stem, two basic blocks (the second strided with a
    projection), global average pooling and a linear head (10 classes)."""

    def __init__(self, width=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, 2)
        self.fc = nn.Linear(2 * width, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
