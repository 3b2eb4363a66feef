"""RNN, LSTM, GRU and their cells, with torch's parameter names (``weight_ih_l0``,
``bias_hh_l1_reverse``, ...), gate order (LSTM i,f,g,o; GRU r,z,n) and initialisation.

The input projection of every time step is one matmul per layer and direction; each step then
runs one fused op (``lstm_step`` / ``gru_step`` in the op spec).
"""
import math

from ember.ops import creation
from ember.ops import nn as _cells
from ember.autograd._generated import functions as G
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence
from ember.errors import EmberRuntimeError, EmberValueError

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """Shared machinery of RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise EmberValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            import warnings
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", UserWarning,
                          stacklevel=2)
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise EmberValueError("hidden_size must be a positive integer")
        if num_layers <= 0:
            raise EmberValueError("num_layers must be greater than or equal to 1")
        if not isinstance(proj_size, int) or proj_size < 0:
            raise EmberValueError("proj_size should be a positive integer or zero to disable "
                                  "projections")
        if proj_size and mode != "LSTM":
            raise EmberValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise EmberValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size      # the size of h (and of each layer's output)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(dirs):
                in_size = input_size if layer == 0 else out_size * dirs
                sfx = "_reverse" if d == 1 else ""
                names = [f"weight_ih_l{layer}{sfx}", f"weight_hh_l{layer}{sfx}"]
                shapes = [(gate, in_size), (gate, out_size)]
                if bias:
                    names += [f"bias_ih_l{layer}{sfx}", f"bias_hh_l{layer}{sfx}"]
                    shapes += [(gate,), (gate,)]
                if proj_size:
                    names.append(f"weight_hr_l{layer}{sfx}")
                    shapes.append((proj_size, hidden_size))
                for n, s in zip(names, shapes):
                    setattr(self, n, Parameter(creation.empty(*s, dtype=dtype)))
                self._flat_weights_names.extend(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    @property
    def all_weights(self):
        k = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        return [[getattr(self, n) for n in self._flat_weights_names[i:i + k]]
                for i in range(0, len(self._flat_weights_names), k)]

    @property
    def _flat_weights(self):
        """The weights in ``_flat_weights_names`` order (None where one is missing), as torch's;
        read from the live attributes, so it follows a reassigned parameter."""
        return [getattr(self, n, None) for n in self._flat_weights_names]

    def flatten_parameters(self):
        """No-op (kept for torch compatibility)."""

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _weights(self, layer, direction):
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer and direction (None where absent)."""
        sfx = "_reverse" if direction == 1 else ""
        get = lambda n: getattr(self, f"{n}_l{layer}{sfx}", None)  # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih") if self.bias else None,
                get("bias_hh") if self.bias else None,
                get("weight_hr") if self.proj_size else None)

    def _state_shapes(self, B, n_states):
        """The shape of each initial state: h is (L*D, B, proj_size or hidden_size), LSTM's c
        (L*D, B, hidden_size)."""
        LD = self.num_layers * (2 if self.bidirectional else 1)
        return [(LD, B, self.proj_size or self.hidden_size), (LD, B, self.hidden_size)][:n_states]

    def _check_states(self, hx, B, dtype, n_states):
        shapes = self._state_shapes(B, n_states)
        if hx is None:   # via dispatch: traces follow the batch
            return tuple(creation.zeros(e, dtype=dtype) for e in shapes)
        for h, e in zip(hx, shapes):
            if tuple(h.shape) != e:
                raise EmberRuntimeError(f"Expected hidden size {e}, got {tuple(h.shape)}")
        return hx

    def _prepare(self, input, hx, n_states):
        """-> (input as (T, B, I), initial states as tuples of (L*D, B, H), unbatched flag)."""
        if input.dim() not in (2, 3):
            raise EmberValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.dim()}D instead")
        unbatched = input.dim() == 2
        if unbatched:
            input = G.unsqueeze(input, 1)
            if hx is not None:
                hx = tuple(G.unsqueeze(h, 1) for h in hx)
        elif self.batch_first:
            input = G.transpose(input, 0, 1)
        if input.shape[-1] != self.input_size:
            raise EmberRuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        return input, self._check_states(hx, input.shape[1], input.dtype, n_states), unbatched

    def _run(self, input, hx, direction=None):
        """Run every layer and direction; returns (output (T, B, D*H) or packed data (N, D*H),
        list of final states). ``direction(x, states, weights, reverse)`` runs one layer's
        direction (``_direction`` unless given)."""
        direction = direction or self._direction
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in hx]
        per_layer = [G.unbind(h, 0) for h in hx]
        x = input
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                states = [h[layer * dirs + d] for h in per_layer]
                seq, last = direction(x, states, self._weights(layer, d), d == 1)
                outs.append(seq)
                for k, s in enumerate(last):
                    finals[k].append(s)
            x = outs[0] if dirs == 1 else G.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [G.stack(f, 0) for f in finals]

    def _finish(self, output, states, unbatched):
        if unbatched:
            output = G.squeeze(output, 1)
            states = [G.squeeze(s, 1) for s in states]
        elif self.batch_first:
            output = G.transpose(output, 0, 1)
        return output, states

    def forward(self, input, hx=None):
        """(output, h_n) for the single-state models (RNN, GRU); LSTM overrides with (h, c)."""
        if isinstance(input, PackedSequence):
            out, finals = self._run_packed(input, None if hx is None else (hx,), 1)
            return out, finals[0]
        x, states, unb = self._prepare(input, None if hx is None else (hx,), 1)
        out, finals = self._run(x, states)
        out, finals = self._finish(out, finals, unb)
        return out, finals[0]

    def _run_packed(self, packed, hx, n_states):
        """Every layer and direction over a PackedSequence: step t advances only the first
        ``batch_sizes[t]`` sequences (the others keep their states); the reverse direction starts
        each sequence at its own last step. Returns (PackedSequence, final states) with the
        states in the caller's batch order."""
        data, sizes = packed.data, [int(b) for b in packed.batch_sizes.numpy()]
        if data.dim() != 2 or data.shape[-1] != self.input_size:
            raise EmberRuntimeError(f"{type(self).__name__}: packed data must be (N, "
                                    f"{self.input_size}), got {tuple(data.shape)}")
        hx = self._check_states(hx, sizes[0], data.dtype, n_states)
        if packed.sorted_indices is not None:
            hx = tuple(G.index_select(h, 1, packed.sorted_indices) for h in hx)

        def direction(x, states, w, reverse):
            gx = G.split(self._input_projection(x, w), sizes, 0)
            return self._packed_direction(gx, sizes, states, w, reverse)
        x, finals = self._run(data, hx, direction)
        if packed.unsorted_indices is not None:
            finals = [G.index_select(f, 1, packed.unsorted_indices) for f in finals]
        return packed._with_data(x), finals

    def _packed_direction(self, gx, sizes, states, w, reverse):
        T = len(sizes)
        outs = [None] * T
        if not reverse:
            for t in range(T):
                b = sizes[t]
                active = [G.narrow(st, 0, 0, b) for st in states]
                new = self._step(gx[t], active, w)
                outs[t] = new[0]
                if b < states[0].shape[0]:
                    new = [G.cat([n, G.narrow(st, 0, b, st.shape[0] - b)], 0)
                           for n, st in zip(new, states)]
                states = new
            return G.cat(outs, 0), states
        running = None
        for t in range(T - 1, -1, -1):
            b = sizes[t]
            if running is None:
                running = [G.narrow(st, 0, 0, b) for st in states]
            elif b > running[0].shape[0]:     # sequences whose last step is t start here
                k = running[0].shape[0]
                running = [G.cat([r, G.narrow(st, 0, k, b - k)], 0)
                           for r, st in zip(running, states)]
            running = self._step(gx[t], running, w)
            outs[t] = running[0]
        return G.cat(outs, 0), running


class RNN(RNNBase):
    """Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs):
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity not in ("tanh", "relu"):
            raise EmberValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)

    def __setattr__(self, name, value):
        if name == "nonlinearity" and "_parameters" not in self.__dict__:
            self.__dict__[name] = value
            return
        super().__setattr__(name, value)

    def _direction(self, x, states, w, reverse):
        w_ih, w_hh, b_ih, b_hh, _ = w
        gx = G.unbind(G.linear(x, w_ih, b_ih), 0)
        h = states[0]
        act = G.tanh if self.nonlinearity == "tanh" else G.relu
        order = range(len(gx) - 1, -1, -1) if reverse else range(len(gx))
        outs = [None] * len(gx)
        w_t = G.t(w_hh)
        for t in order:
            pre = G.add(gx[t], G.matmul(h, w_t))
            if b_hh is not None:
                pre = G.add(pre, b_hh)
            h = act(pre)
            outs[t] = h
        return G.stack(outs, 0), (h,)

    def _input_projection(self, x, w):
        return G.linear(x, w[0], w[2])

    def _step(self, gx, states, w):
        w_hh, b_hh = w[1], w[3]
        pre = G.add(gx, G.matmul(states[0], G.t(w_hh)))
        if b_hh is not None:
            pre = G.add(pre, b_hh)
        return [G.tanh(pre) if self.nonlinearity == "tanh" else G.relu(pre)]


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o as torch); with ``proj_size`` > 0 the hidden
    state is projected, h = W_hr (o * tanh(c)), as torch."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def _direction(self, x, states, w, reverse):
        if w[4] is not None:     # projected: step by step (the fused layer keeps h at size H)
            gx = G.split(self._input_projection(x, w), 1, 0)
            outs, st = [None] * len(gx), states
            for t in (range(len(gx) - 1, -1, -1) if reverse else range(len(gx))):
                st = self._step(G.squeeze(gx[t], 0), st, w)
                outs[t] = st[0]
            return G.stack(outs, 0), tuple(st)
        out, h, c, _ = G.lstm_layer(self._input_projection(x, w), states[0], states[1], w[1],
                                    reverse)
        return out, (h, c)

    def _input_projection(self, x, w):
        w_ih, _, b_ih, b_hh, _ = w
        return G.linear(x, w_ih, None if b_ih is None else G.add(b_ih, b_hh))

    def _step(self, gx, states, w):
        h, c, _ = G.lstm_step(gx, states[0], states[1], w[1])
        return [h if w[4] is None else G.matmul(h, G.t(w[4])), c]

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            out, finals = self._run_packed(input, hx, 2)
            return out, (finals[0], finals[1])
        x, states, unb = self._prepare(input, hx, 2)
        out, finals = self._run(x, states)
        out, finals = self._finish(out, finals, unb)
        return out, (finals[0], finals[1])


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n as torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)

    def _direction(self, x, states, w, reverse):
        w_ih, w_hh, b_ih, b_hh, _ = w
        gx = G.unbind(G.linear(x, w_ih, b_ih), 0)
        h = states[0]
        order = range(len(gx) - 1, -1, -1) if reverse else range(len(gx))
        outs = [None] * len(gx)
        for t in order:
            h, _ = G.gru_step(gx[t], h, w_hh, b_hh)
            outs[t] = h
        return G.stack(outs, 0), (h,)

    def _input_projection(self, x, w):
        return G.linear(x, w[0], w[2])

    def _step(self, gx, states, w):
        return [G.gru_step(gx, states[0], w[1], w[3])[0]]


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(creation.empty(num_chunks * hidden_size, input_size,
                                                  dtype=dtype))
        self.weight_hh = Parameter(creation.empty(num_chunks * hidden_size, hidden_size,
                                                  dtype=dtype))
        if bias:
            self.bias_ih = Parameter(creation.empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(creation.empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":   # torch: unquoted
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _batched(self, input, hx, n):
        if input.dim() not in (1, 2):
            raise EmberValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        unb = input.dim() == 1
        if unb:
            input = G.unsqueeze(input, 0)
        if hx is None:
            z = creation.zeros((input.shape[0], self.hidden_size), dtype=input.dtype)
            hx = (z,) * n
        elif unb:
            hx = tuple(G.unsqueeze(h, 0) for h in hx)
        return input, hx, unb


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), unb = self._batched(input, None if hx is None else (hx,), 1)
        cell = _cells.rnn_tanh_cell if self.nonlinearity == "tanh" else _cells.rnn_relu_cell
        h = cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return G.squeeze(h, 0) if unb else h


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, (h, c), unb = self._batched(input, hx, 2)
        h, c = _cells.lstm_cell(x, (h, c), self.weight_ih, self.weight_hh, self.bias_ih,
                                self.bias_hh)
        if unb:
            return G.squeeze(h, 0), G.squeeze(c, 0)
        return h, c


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), unb = self._batched(input, None if hx is None else (hx,), 1)
        h = _cells.gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return G.squeeze(h, 0) if unb else h
