"""AdaptiveLogSoftmaxWithLoss (Grave et al., 2016), with torch's parameters and state_dict keys
(head, tail.i.0, tail.i.1). The target's clusters are selected by masks, not by gathering rows:
every tail runs on the whole batch, so a trace does not depend on the target's values."""
from collections import namedtuple

import numpy as np

from ember.autograd._generated import functions as G
from ember.errors import EmberRuntimeError, EmberValueError
from ember.nn import functional as F
from ember.nn.modules.container import ModuleList, Sequential
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise EmberValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 \
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise EmberValueError("cutoffs should be a sequence of unique, positive integers "
                                  "sorted in an increasing order, where each value is between "
                                  "1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, dtype=dtype),
                                        Linear(hsz, osz, bias=False, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        tdim = target_.dim()
        if tdim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise EmberRuntimeError("Input and target should have the same size in the "
                                        "batch dimension.")
            if input_.dim() != 2:
                raise EmberRuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                        f"inputs with size {list(input_.shape)}")
        elif tdim == 0:
            if input_.dim() != 1:
                raise EmberRuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                        f"inputs with size {list(input_.shape)}")
        else:
            raise EmberRuntimeError("0D or 1D target tensor expected, multi-target not "
                                    "supported")
        batched = tdim > 0
        input = input_ if batched else G.unsqueeze(input_, 0)
        target = target_ if batched else G.unsqueeze(target_, 0)
        t = F._read(target, "AdaptiveLogSoftmaxWithLoss", "the target range check")
        if t.size and (t.min() < 0 or t.max() > self.n_classes - 1):
            raise EmberRuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                                    f"values in range [{t.min()}, {t.max()}] were found. ")
        dt = input._data.dtype
        head_logprob = F.log_softmax(self.head(input), 1)
        gather = target
        output = None
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            inside = G.logical_and(G.ge(target, low), G.lt(target, high))
            rel = G.where(inside, G.sub(target, low), 0)
            logp = F.log_softmax(self.tail[i](input), 1)
            local = G.squeeze(G.gather(logp, 1, G.unsqueeze(rel, 1)), 1)
            local = G.where(inside, local, G.zeros((), np.dtype(dt)))
            output = local if output is None else G.add(output, local)
            gather = G.where(inside, self.shortlist_size + i, gather)
        head = G.squeeze(G.gather(head_logprob, 1, G.unsqueeze(gather, 1)), 1)
        output = head if output is None else G.add(output, head)
        loss = G.mean(G.neg(output))
        if not batched:
            output = G.squeeze(output, 0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, 1)
        parts = [G.getitem(head_logprob, (slice(None), slice(0, self.shortlist_size)))]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), 1)
            parts.append(G.add(cluster, G.getitem(head_logprob, (
                slice(None), slice(self.shortlist_size + i, self.shortlist_size + i + 1)))))
        return G.cat(parts, 1)

    def log_prob(self, input):
        """Log probabilities (N, n_classes) of every class."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each row (log_prob(input).argmax(1))."""
        return G.argmax(self.log_prob(input), 1, False)
