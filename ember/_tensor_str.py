"""How a tensor's repr lays out its values, as torch._tensor_str does, on NumPy arrays: the
print options (``set_printoptions`` writes them), ``tensor_str`` (the ``[...]`` body) and
``add_suffixes`` (``dtype=``, ``grad_fn=``, ... wrapped at ``linewidth``). A leaf module: the
tensor repr, sparse tensors' repr and ``ember._printing`` use it."""
import math

import numpy as np

# how tensors print (ember.set_printoptions; torch's defaults)
PRINT_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                 "sci_mode": None}

# torch._tensor_str's layout, on NumPy arrays: a formatter per tensor (one width for every
# element), ``edgeitems`` rows/elements at each end when summarising, lines wrapped at
# ``linewidth`` and the suffixes (dtype=, grad_fn=, ...) wrapped after the body.

class _Formatter:
    """How each element prints: ints/bools as ``str``; floats in int mode (``1.``), fixed
    (``precision`` decimals) or scientific notation, all padded to one width."""

    def __init__(self, a, floating):
        self.floating, self.int_mode, self.sci_mode, self.max_width = floating, True, False, 1
        p = int(PRINT_OPTIONS["precision"])
        if not floating:
            for v in np.unique(a.reshape(-1)).tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        vals = a.reshape(-1)
        vals = vals[np.isfinite(vals) & (vals != 0)]
        if vals.size == 0:
            return
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        absv = np.abs(vals).astype(np.float64)
        lo, hi = absv.min(), absv.max()
        sci = PRINT_OPTIONS["sci_mode"]
        self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) if sci is None \
            else sci
        uniq = np.unique(vals).tolist()
        if self.sci_mode:
            w = max(len(f"{v:.{p}e}") for v in uniq)
        elif self.int_mode:
            w = max(len(f"{v:.0f}") for v in uniq) + 1
        else:
            w = max(len(f"{v:.{p}f}") for v in uniq)
        self.max_width = max(self.max_width, w)

    def format(self, v):
        p = int(PRINT_OPTIONS["precision"])
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{p}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{p}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


def _value_str(v, f1, f2):
    if f2 is None:
        return f1.format(v)
    real, imag = f1.format(v.real), (f2.format(v.imag) + "j").lstrip()
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _vector_str(a, indent, summarize, f1, f2):
    edge = int(PRINT_OPTIONS["edgeitems"])
    width = f1.max_width + 2 + (f2.max_width + 1 if f2 is not None else 0)
    per_line = max(1, math.floor((PRINT_OPTIONS["linewidth"] - indent) / width))
    if summarize and not edge:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        data = ([_value_str(v, f1, f2) for v in a[:edge].tolist()] + [" ..."] +
                [_value_str(v, f1, f2) for v in a[-edge:].tolist()])
    else:
        data = [_value_str(v, f1, f2) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(a, indent, summarize, f1, f2):
    if a.ndim == 0:
        return _value_str(a.item(), f1, f2)
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, f1, f2)
    edge = int(PRINT_OPTIONS["edgeitems"])
    if summarize and a.shape[0] > 2 * edge:
        rows = ([_nested_str(a[i], indent + 1, summarize, f1, f2) for i in range(edge)] +
                ["..."] + [_nested_str(a[i], indent + 1, summarize, f1, f2)
                           for i in range(a.shape[0] - edge, a.shape[0])])
    else:
        rows = [_nested_str(r, indent + 1, summarize, f1, f2) for r in a]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _summarized(a):
    """The elements a summarised print shows (torch's get_summarized_data)."""
    edge = int(PRINT_OPTIONS["edgeitems"])
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate((a[:edge], a[-edge:])) if a.shape[0] > 2 * edge else a
    if not edge:
        return a[(slice(0, 0),) * a.ndim]
    rows = list(a[:edge]) + list(a[-edge:]) if a.shape[0] > 2 * edge else list(a)
    return np.stack([_summarized(r) for r in rows])


def tensor_str(a, indent, floating):
    """The body of a tensor's repr (``[...]``) for the NumPy array ``a`` that starts ``indent``
    columns right (torch._tensor_str._tensor_str)."""
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTIONS["threshold"]
    shown = _summarized(a) if summarize else a
    if a.dtype.kind == "c":
        return _nested_str(a, indent, summarize, _Formatter(shown.real, True),
                           _Formatter(shown.imag, True))
    return _nested_str(a, indent, summarize, _Formatter(shown, floating), None)


def add_suffixes(text, suffixes, indent, force_newline=False):
    """``text`` + ``, suffix`` for each, wrapped at ``linewidth`` (torch's _add_suffixes)."""
    parts, last = [text], len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if force_newline or last + len(s) + 2 > PRINT_OPTIONS["linewidth"]:
            parts.append(",\n" + " " * indent + s)
            last, force_newline = indent + len(s), False
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"
