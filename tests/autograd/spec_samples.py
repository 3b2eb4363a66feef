"""Turn the ``test:`` fields of the op spec (ember/ops/spec/*.yaml) into concrete sample calls.

Tokens: ``f3,4`` normal floats, ``p3,4`` positive, ``u3,4`` in (0.1, 0.9), ``i5:3,4`` int64 in
[0, 5), ``b3,4`` bool, ``w3,3`` well-conditioned square matrices (normal + 3 I), ``h2,3,3``
symmetric positive definite (X X^T / n + I), ``s2.5`` a Python scalar, ``=<expr>`` a constant, ``!<expr>`` an expression
(``np`` available), ``[a b]`` a tensor list, and ``| k=v, ...`` keyword arguments. Kinds ``unary``
and ``binary`` expand to standard shape sets (broadcasting, 0-d, size 0 and 1)."""
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from gen_autograd import load_spec, parse_signature  # noqa: E402

UNARY = ["f3,4", "f5", "f", "f0,3", "f1,1"]
BINARY = ["f3,4 f3,4", "f3,4 f4", "f3,1 f1,4", "f3,4 s2.5", "f f3", "f0,4 f4", "f1 f1"]
_TOKEN = re.compile(r"^([fpuibwh])(\d*):?([\d,]*)$")


class Leaf:
    """A tensor to be created for a sample (kind, shape, int bound)."""

    def __init__(self, kind, shape, high=None):
        self.kind, self.shape, self.high = kind, shape, high

    def make(self, rng, dtype):
        return np.asarray(self._make(rng, dtype))

    def _make(self, rng, dtype):
        if self.kind == "f":
            return rng.standard_normal(self.shape).astype(dtype)
        if self.kind == "p":
            return (np.abs(rng.standard_normal(self.shape)) + 0.5).astype(dtype)
        if self.kind == "u":
            return rng.uniform(0.1, 0.9, self.shape).astype(dtype)
        if self.kind == "i":
            return rng.integers(0, self.high, self.shape).astype(np.int64)
        if self.kind == "b":
            return rng.random(self.shape) > 0.5
        if self.kind == "w":
            return (rng.standard_normal(self.shape) + 3 * np.eye(self.shape[-1])).astype(dtype)
        if self.kind == "h":
            x = rng.standard_normal(self.shape)
            return (x @ np.swapaxes(x, -1, -2) / self.shape[-1] + np.eye(self.shape[-1])).astype(dtype)
        raise ValueError(self.kind)

    @property
    def is_float(self):
        return self.kind in "fpuwh"

    def __repr__(self):
        return f"{self.kind}{list(self.shape)}"


def _domain(token, domain):
    if domain == "positive" and token.startswith("f"):
        return "p" + token[1:]
    if domain == "unit" and token.startswith("f"):
        return "u" + token[1:]
    return token


def _parse_token(tok):
    if tok.startswith("="):
        return eval(tok[1:], {"np": np, "float": float})
    if tok.startswith("!"):
        import ember
        return eval(tok[1:], {"np": np, "slice": slice, "Ellipsis": Ellipsis, "ember": ember})
    if tok.startswith("s"):
        return eval(tok[1:])
    m = _TOKEN.match(tok)
    if not m:
        raise ValueError(f"bad sample token {tok!r}")
    kind, high, shape = m.groups()
    if kind == "i":
        high, shape = int(high), tuple(int(s) for s in shape.split(",") if s)
    else:
        shape = tuple(int(s) for s in (high + shape).split(",") if s) if (high + shape) else ()
        high = None
    return Leaf(kind, shape, high)


def _split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == " " and depth == 0:
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


def parse_sample(text):
    pos_s, _, kw_s = text.partition("|")
    args = []
    for tok in _split_args(pos_s.strip()):
        if tok.startswith("[") and tok.endswith("]"):
            args.append([_parse_token(t) for t in tok[1:-1].split()])
        else:
            args.append(_parse_token(tok))
    kwargs = eval(f"dict({kw_s})", {"np": np}) if kw_s.strip() else {}
    return args, kwargs


def samples_for(entry):
    test = entry.get("test")
    if test is None:
        return []
    if isinstance(test, str):
        test = {"kind": test}
    texts = list(test.get("samples", []))
    kind = test.get("kind")
    if kind == "unary":
        texts = [_domain(t, test.get("domain")) for t in UNARY] + texts
    elif kind == "binary":
        dom, dom_o = test.get("domain"), test.get("domain_other")
        for t in BINARY:
            a, b = t.split()
            if b.startswith("s") and not entry.get("scalar_ok"):
                continue
            texts.append(f"{_domain(a, dom)} {_domain(b, dom_o)}")
    texts += test.get("extra", [])
    return [parse_sample(t) for t in texts]


class OpCase:
    def __init__(self, entry):
        self.entry = entry
        self.name, self.args, self.returns = parse_signature(entry["func"])
        test = entry.get("test") or {}
        self.test = {"kind": test} if isinstance(test, str) else test
        self.samples = samples_for(entry)
        self.nondiff = bool(entry.get("nondiff"))

    @property
    def differentiable(self):
        if self.nondiff:
            return False
        if self.entry.get("composite"):
            return True
        return any(self.entry.get(a.name) not in (None, "non_differentiable", "refuses_grad") for a in self.args
                   if a.is_tensor) or "joint" in self.entry

    def tensor_positions(self):
        return {i for i, a in enumerate(self.args) if a.is_tensor}

    def tensor_names(self):
        return {a.name for a in self.args if a.is_tensor}


def cases():
    return [OpCase(e) for e in load_spec()]
