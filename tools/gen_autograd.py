#!/usr/bin/env python3
"""Generate ember/autograd/_generated.py from the op spec, ember/ops/spec/<family>.yaml.

For every op in the spec this emits: a backward Node class that saves only what its derivative
formulas use (a shape instead of a tensor where only ``x.shape`` is read), the ``Op`` record the
dispatcher runs, the functional API, Tensor methods, in-place variants and operators. Broadcast
inputs get their gradient summed back to their shape here, never in a formula.

Ops with a ``pointwise:`` entry also get their pointwise form, in ember/autograd/_pointwise.py:
a function per op emitting pointwise-engine steps on symbolic values (what the JIT fuses a node
into) and a derivative rule per vocabulary op (the op's formulas, the same code, evaluated on
symbolic values: what a fused backward is derived with).

Usage: ``python tools/gen_autograd.py`` (write) or ``--check`` (exit 1 when a file is stale);
``--out-dir DIR`` writes or checks the two files in DIR instead of ember/autograd (tests check a
copy, never rewriting a tracked file).
"""
import ast
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC_DIR = os.path.join(ROOT, "ember", "ops", "spec")
OUT = os.path.join(ROOT, "ember", "autograd", "_generated.py")
OUT_POINTWISE = os.path.join(ROOT, "ember", "autograd", "_pointwise.py")
CONSTANTS = os.path.join(ROOT, "ember", "kernels", "constants.py")
FORMULAS = os.path.join(ROOT, "ember", "autograd", "formulas.py")

TENSOR_TYPES = ("Tensor", "Tensor?", "Tensor[]")
# Python's operator for each Tensor dunder the spec can name (INFIX/PREFIX in the generated code)
PY_OPERATORS = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/",
                "__floordiv__": "//", "__mod__": "%", "__pow__": "**", "__matmul__": "@",
                "__and__": "&", "__or__": "|", "__xor__": "^", "__eq__": "==", "__ne__": "!=",
                "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=", "__neg__": "-",
                "__invert__": "~"}
RESERVED = {"grad", "grads", "result", "ctx", "needs"}


class Arg:
    def __init__(self, type_, name, default, kwonly):
        self.type = type_
        self.name = name
        self.default = default
        self.kwonly = kwonly

    @property
    def is_tensor(self):
        return self.type in TENSOR_TYPES

    @property
    def py(self):
        return "self_" if self.name == "self" else self.name


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_signature(sig):
    m = re.fullmatch(r"\s*([\w.]+)\((.*)\)\s*->\s*(.+)", sig)
    if not m:
        raise SystemExit(f"bad signature: {sig}")
    name, args_s, ret = m.groups()
    args, kwonly = [], False
    for part in split_top(args_s):
        if part == "*":
            kwonly = True
            continue
        decl, _, default = part.partition("=")
        type_, pname = decl.split()
        args.append(Arg(type_, pname, default.strip() or None, kwonly))
    ret = ret.strip()
    if ret.startswith("("):
        outs = []
        for r in split_top(ret[1:-1]):
            t, n = r.split()
            outs.append((n, "nondiff" not in t))
        returns = ("tuple", outs)
    elif ret == "Tensor[]":
        returns = ("list", [])
    else:
        returns = ("single", [("result", True)])
    return name, args, returns


class Formula:
    """One derivative formula, rewritten to use unpacked saved values."""

    def __init__(self, text, op):
        self.text = str(text)
        self.tree = ast.parse(self.text, mode="eval")
        self.uses = set()        # saved value keys: name, name_shape, name_dtype, result...
        self.calls = set()       # spec ops the formula calls
        self.helpers = op.helpers
        self.ops = op.op_names
        tensor_names = {a.name for a in op.args if a.is_tensor}
        list_names = {a.name for a in op.args if a.type == "Tensor[]"}
        outer = self

        class Rewrite(ast.NodeTransformer):
            def visit_Attribute(self, node):
                if (isinstance(node.value, ast.Name) and node.value.id in tensor_names
                        and node.attr in ("shape", "dtype", "geometry")):
                    base = "self_" if node.value.id == "self" else node.value.id
                    key = f"{base}_{node.attr}"
                    outer.uses.add(key)
                    return ast.copy_location(ast.Name(key, ast.Load()), node)
                return self.generic_visit(node)

            def visit_Name(self, node):
                n = node.id
                if n.endswith("_shapes") and n[:-7] in list_names:
                    outer.uses.add(n)
                    return node
                if n in tensor_names or n in op.const_names:
                    key = "self_" if n == "self" else n
                    outer.uses.add(key)
                    return ast.copy_location(ast.Name(key, ast.Load()), node)
                if n == "result" or n in op.out_names:
                    outer.uses.add(n)
                    return node
                if n in outer.helpers:
                    return ast.copy_location(
                        ast.Attribute(ast.Name("_F", ast.Load()), n, ast.Load()), node)
                if n.isupper():
                    if n not in op.constants:
                        raise SystemExit(f"{op.name}: {n} is not in ember/kernels/constants.py")
                    return ast.copy_location(
                        ast.Attribute(ast.Name("_C", ast.Load()), n, ast.Load()), node)
                if isinstance(node.ctx, ast.Load) and n in op.op_names:
                    outer.calls.add(n)
                return node

        self.tree = ast.fix_missing_locations(Rewrite().visit(self.tree))

    @property
    def code(self):
        return ast.unparse(self.tree)


class OpSpec:
    def __init__(self, entry, helpers, op_names, constants=frozenset()):
        self.entry = entry
        self.name, self.args, self.returns = parse_signature(entry["func"])
        self.helpers = helpers
        self.op_names = op_names
        self.constants = constants
        self.pointwise = entry.get("pointwise")
        self.pointwise_rules = entry.get("pointwise_rules") or {}
        self.tensor_args = [a for a in self.args if a.is_tensor]
        self.const_args = [a for a in self.args if not a.is_tensor]
        self.const_names = {a.name for a in self.const_args}
        kind, outs = self.returns
        self.out_names = [n for n, _ in outs] if kind == "tuple" else []
        self.multi = kind in ("tuple", "list")
        self.list_input = any(a.type == "Tensor[]" for a in self.args)
        self.nondiff = bool(entry.get("nondiff"))
        self.composite = entry.get("composite")
        self.formulas = {}
        self.joint = None
        if "joint" in entry:
            self.joint = Formula(entry["joint"], self)
            for a in self.tensor_args:
                if entry.get(a.name) != "non_differentiable":
                    self.formulas[a.name] = self.joint
        elif not self.nondiff and not self.composite:
            for a in self.tensor_args:
                f = entry.get(a.name)
                if f is None:
                    raise SystemExit(f"{self.name}: no derivative for input '{a.name}' (write a "
                                     "formula or 'non_differentiable')")
                if f != "non_differentiable":
                    self.formulas[a.name] = Formula(f, self)
        self.broadcast = bool(entry.get("broadcast"))
        if self.broadcast:
            for a in self.tensor_args:
                if a.name in self.formulas:
                    self.formulas[a.name].uses.add(f"{a.py}_shape")

    @property
    def cls(self):
        return "".join(p.capitalize() for p in self.name.split("_")) + "Backward0"

    @property
    def differentiable(self):
        return bool(self.formulas)

    def saved_keys(self):
        """Ordered saved keys with the input positions whose formulas need each."""
        keys = {}
        for i, a in enumerate(self.tensor_args):
            f = self.formulas.get(a.name)
            if f is None:
                continue
            for k in sorted(f.uses):
                keys.setdefault(k, set()).add(i)
        return keys


def py_default(arg):
    d = arg.default
    if d is None:
        return None
    return {"true": "True", "false": "False", "None": "None", "[]": "()"}.get(d, d)


def signature(op, first_name="input"):
    parts, star = [], False
    varargs = op.entry.get("varargs")
    for i, a in enumerate(op.args):
        name = first_name if i == 0 and a.name == "self" else a.name
        if name == varargs:
            parts.append(f"*{name}")
            star = True
            continue
        if a.kwonly and not star:
            parts.append("*")
            star = True
        d = py_default(a)
        parts.append(f"{name}={d}" if d is not None else name)
    return ", ".join(parts)


def call_names(op, first_name="input"):
    return [first_name if i == 0 and a.name == "self" else a.name for i, a in enumerate(op.args)]


def emit_backward(op, w):
    keys = op.saved_keys()
    slot_names = list(keys)
    tensor_index = {a.py: i for i, a in enumerate(op.tensor_args)}
    saved_tensor_slots = [k for k in slot_names if k in tensor_index or k == "result"
                          or k in op.out_names]
    w(f"class {op.cls}(Node):")
    w(f"    __slots__ = {tuple(slot_names)!r}")
    w(f"    _saved = {tuple(saved_tensor_slots)!r}")
    w(f"    _op_name = {op.name!r}")
    w("")
    w("    def __init__(ctx, tensors, consts, outs, needs):")
    w("        ctx._seq = next_seq()")
    tnames = [a.py for a in op.tensor_args]
    if op.list_input:
        w(f"        {tnames[0]} = tensors")
    elif tnames:
        w(f"        {', '.join(tnames)}, = tensors")
    cnames = [a.name for a in op.const_args]
    if cnames:
        w(f"        {', '.join(cnames)}, = consts")
    for k, users in keys.items():
        cond = " or ".join(f"needs[{i}]" for i in sorted(users)) if not op.list_input else "_builtins.any(needs)"
        if k in tensor_index:
            val = f"_save({k}, {k!r})"
        elif k.endswith("_shapes"):
            val = f"[_shape(t) for t in {k[:-7]}]"
        elif k.endswith("_shape") and k[:-6] in tensor_index:
            val = f"_shape({k[:-6]})"
        elif k.endswith("_dtype") and k[:-6] in tensor_index:
            val = f"_dtype({k[:-6]})"
        elif k.endswith("_geometry") and k[:-9] in tensor_index:
            val = f"_geometry({k[:-9]})"
        elif k == "result":
            val = "_save_out(outs[0], 'result', 0)"
        elif k in op.out_names:
            idx = op.out_names.index(k)
            diff = op.returns[1][idx][1]
            val = f"_save_out(outs[{idx}], {k!r}, {idx})" if diff else f"_save(outs[{idx}], {k!r})"
        else:
            val = k
        w(f"        ctx.{k} = {val} if {cond} else None")
    w("")
    w("    def apply(ctx, grads):")
    w("        grad = grads[0]")
    w("        needs = ctx.needs")
    for k in slot_names:
        if k in saved_tensor_slots:
            w(f"        {k} = unpack(ctx.{k}, ctx)")
        else:
            w(f"        {k} = ctx.{k}")
    if op.list_input or op.joint is not None:
        f = op.joint or op.formulas[op.tensor_args[0].name]
        w(f"        return tuple({f.code})")
        w("")
        return
    n = len(op.tensor_args)
    w("        " + " = ".join(f"g{i}" for i in range(n)) + " = None")
    for i, a in enumerate(op.tensor_args):
        f = op.formulas.get(a.name)
        if f is None:
            continue
        code = f.code
        if op.broadcast:
            code = f"_F.sum_to({code}, {a.py}_shape)"
        w(f"        if needs[{i}]:")
        w(f"            g{i} = {code}")
    w(f"        return ({''.join(f'g{i}, ' for i in range(n))})")
    w("")


def emit_op(op, w):
    e = op.entry
    tn = tuple(a.name for a in op.tensor_args)
    cn = tuple(a.name for a in op.const_args)
    if op.composite:
        return
    mod, fn = e["kernel"].rsplit(".", 1)
    backward = op.cls if op.differentiable else "None"
    kw = []
    if e.get("view"):
        kw.append("view=True")
    if op.multi:
        kw.append("multi=True")
    if op.returns[0] == "list":
        kw.append("returns_list=True")
    if op.list_input:
        kw.append("list_input=True")
    if op.returns[0] == "tuple":
        kw.append(f"diff_outputs={tuple(d for _, d in op.returns[1])!r}")
    if e.get("scalar_ok"):
        kw.append("scalar_ok=True")
    if e.get("random"):
        kw.append("random=True")
    saves_self = bool(op.tensor_args) and op.tensor_args[0].py in op.saved_keys()
    kw.append(f"saves_self={saves_self}")
    w(f"_op_{op.name} = Op({op.name!r}, _k_{mod}.{fn}, {backward}, {tn!r}, {cn!r}, "
      f"{', '.join(kw)})")
    w(f"OPS[{op.name!r}] = _op_{op.name}")
    w("")


def emit_function(op, w):
    e = op.entry
    sig = signature(op)
    if e.get("inplace_arg"):
        sig += ", inplace=False"
    names = call_names(op)
    doc = e.get("doc", f"{op.name} (see torch.{op.name}).")
    public = op.name
    w(f"def {public}({sig}):")
    w(f'    """{doc}"""')
    if e.get("varargs"):
        w(f"    {e['varargs']} = _F._varargs({e['varargs']})")
    if op.composite:
        mod, fn = op.composite.rsplit(".", 1)
        w(f"    return _c_{mod}.{fn}({', '.join(names)})")
    else:
        tnames = [names[i] for i, a in enumerate(op.args) if a.is_tensor]
        cnames = [names[i] for i, a in enumerate(op.args) if not a.is_tensor]
        tensors = f"tuple({tnames[0]})" if op.list_input else f"({''.join(t + ', ' for t in tnames)})"
        call = f"dispatch(_op_{op.name}, {tensors}, ({''.join(c + ', ' for c in cnames)}))"
        if e.get("inplace_arg"):
            # in place, the backward must not save the input that copy_ then overwrites:
            # the op runs on a clone (torch saves the result instead)
            x = names[0]
            w(f"    if inplace and getattr({x}, 'requires_grad', False):")
            w(f"        {x}_saved = {x}.clone()")
            w(f"        return {x}.copy_({call.replace(x, x + '_saved', 1)})")
            w(f"    out = {call}")
            w(f"    return {x}.copy_(out) if inplace else out")
        else:
            w(f"    return {call}")
    w("")
    if e.get("inplace"):
        w(f"def {public}_({signature(op, 'self')}):")
        w(f'    """In-place {op.name}: writes the result into ``self`` and returns it."""')
        if e.get("varargs"):
            w(f"    {e['varargs']} = _F._varargs({e['varargs']})")
        names_s = call_names(op, "self")
        tnames = [names_s[i] for i, a in enumerate(op.args) if a.is_tensor]
        cnames = [names_s[i] for i, a in enumerate(op.args) if not a.is_tensor]
        w(f"    return dispatch_inplace(_op_{op.name}, ({''.join(t + ', ' for t in tnames)}), "
          f"({''.join(c + ', ' for c in cnames)}))")
        w("")


class PointwiseRewrite(ast.NodeTransformer):
    """A ``pointwise:`` expression as code: vocabulary calls on ``_V``, inputs and constants by
    their Python names, UPPERCASE constants from ``_C``."""

    def __init__(self, op):
        self.op = op
        self.names = {a.name for a in op.args}

    def visit_Call(self, node):
        if not isinstance(node.func, ast.Name):
            raise SystemExit(f"{self.op.name}: pointwise: calls vocabulary ops by name")
        node.func = ast.Attribute(ast.Name("_V", ast.Load()), node.func.id, ast.Load())
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        return node

    def visit_Name(self, node):
        if node.id in self.names:
            return ast.copy_location(ast.Name("self_" if node.id == "self" else node.id,
                                              ast.Load()), node)
        if node.id.isupper() and node.id in self.op.constants:
            return ast.copy_location(
                ast.Attribute(ast.Name("_C", ast.Load()), node.id, ast.Load()), node)
        raise SystemExit(f"{self.op.name}: pointwise: unknown name {node.id!r}")


def pointwise_code(op):
    """The body expression of ``op``'s pointwise function."""
    if op.pointwise is True:
        args = ", ".join(a.py for a in op.tensor_args + op.const_args)
        return f"_V.{op.name}({args})"
    tree = ast.parse(str(op.pointwise), mode="eval")
    return ast.unparse(ast.fix_missing_locations(PointwiseRewrite(op).visit(tree)))


def pointwise_signature(op):
    parts = []
    for a in op.args:
        d = py_default(a)
        parts.append(f"{a.py}={d}" if d is not None else a.py)
    return ", ".join(parts)


def rule_code(op, pointwise_names):
    """``(params, body)`` of ``op``'s derivative rule on symbolic values, or None when its
    formulas read dtypes (``to``: ``derive`` casts the gradient back itself)."""
    uses = set()
    for a in op.tensor_args:
        f = op.formulas.get(a.name)
        if f is None:
            continue
        missing = f.calls - pointwise_names
        if missing:
            raise SystemExit(f"{op.name}: the formula of '{a.name}' calls {sorted(missing)}, "
                             "which have no pointwise: entry (needed for its fused backward)")
        uses |= f.uses
    if any(k.endswith("_dtype") for k in uses):
        return None
    params = ["grad"] + [pointwise_signature(op)]
    extra = sorted(k for k in uses if k.endswith("_shape") or k.endswith("_shapes"))
    params.append("*, result=None" + "".join(f", {k}=None" for k in extra))
    items = []
    for a in op.tensor_args:
        f = op.formulas.get(a.name)
        items.append("None" if f is None else f"({f.code}) if _is_sym({a.py}) else None")
    return ", ".join(params), "(" + "".join(f"{i}, " for i in items) + ")"


def emit_pointwise_module(ops):
    """Source of ember/autograd/_pointwise.py."""
    lines = []
    w = lines.append
    w('"""GENERATED by tools/gen_autograd.py from ember/ops/spec/*.yaml. DO NOT EDIT.')
    w("")
    w("The pointwise form of every spec op with a ``pointwise:`` entry, on the symbolic values of")
    w("``ember.kernels.pointwise.expr`` (``Sym``): ``FORWARD[op](*inputs, **constants)`` emits the")
    w("op's pointwise-engine steps and returns its value (None: not fusible with these constants);")
    w("``RULES[vocabulary op](grad, *operands, *parameters, result=...)`` returns one gradient")
    w("contribution per operand (a Sym, ``ZERO`` or None): the op's derivative formulas, the code")
    w("of _generated.py, evaluated on symbolic values. The functions carry the spec ops' names so")
    w("that formulas calling other ops (``neg(grad)``) call their pointwise forms.")
    w('"""')
    w("# flake8: noqa")
    w("# fmt: off")
    w("from functools import partial as _partial")
    w("")
    w("from ember.autograd import formulas as _F")
    w("from ember.kernels import constants as _C")
    w("from ember.kernels.pointwise.expr import Sym as _Sym, vocabulary as _V")
    w("")
    w("")
    w("def _is_sym(x):")
    w("    return isinstance(x, _Sym)")
    w("")
    pw = [op for op in ops if op.pointwise is not None]
    names = {op.name for op in pw}
    for op in pw:
        w("")
        w("")
        w(f"def {op.name}({pointwise_signature(op)}):")
        w(f"    return {pointwise_code(op)}")
    rules = {}
    for op in pw:
        if not op.differentiable:
            continue
        rc = rule_code(op, names)
        if rc is None:
            continue
        params, body = rc
        w("")
        w("")
        w(f"def _d_{op.name}({params}):")
        w(f"    return {body}")
        rules[op.name] = f"_d_{op.name}"
        for vocab, consts in op.pointwise_rules.items():
            kw = ", ".join(f"{k}={v!r}" for k, v in consts.items())
            rules[vocab] = f"_partial(_d_{op.name}, {kw})"
    w("")
    w("")
    w("FORWARD = {")
    for op in pw:
        w(f"    {op.name!r}: {op.name},")
    w("}")
    w("RULES = {")
    for k, v in rules.items():
        w(f"    {k!r}: {v},")
    w("}")
    return "\n".join(lines) + "\n"


def load_spec(spec_dir=SPEC_DIR):
    """Every entry of the op spec: the ``*.yaml`` files of ``spec_dir`` in name order, each
    file's entries in order. Raises SystemExit when a file holds something else than a list."""
    entries = []
    for name in sorted(os.listdir(spec_dir)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(spec_dir, name)) as fh:
            family = yaml.safe_load(fh)
        if not isinstance(family, list):
            raise SystemExit(f"ember/ops/spec/{name}: expected a list of op entries")
        entries += family
    return entries


def main():
    spec = load_spec()
    with open(FORMULAS) as fh:
        helpers = {n.name for n in ast.parse(fh.read()).body if isinstance(n, ast.FunctionDef)
                   and not n.name.startswith("_")}
    with open(CONSTANTS) as fh:
        constants = {t.id for n in ast.parse(fh.read()).body if isinstance(n, ast.Assign)
                     for t in n.targets if isinstance(t, ast.Name) and t.id.isupper()}
    op_names = {parse_signature(e["func"])[0] for e in spec}
    ops = [OpSpec(e, helpers, op_names, constants) for e in spec]
    seen = set()
    for op in ops:
        if op.name in seen:
            raise SystemExit(f"duplicate op {op.name}")
        seen.add(op.name)
    lines = []
    w = lines.append
    w('"""GENERATED by tools/gen_autograd.py from ember/ops/spec/*.yaml. DO NOT EDIT."""')
    w("# flake8: noqa")
    w("# fmt: off")
    w("import builtins as _builtins")
    w("")
    kmods = sorted({op.entry["kernel"].rsplit(".", 1)[0] for op in ops if not op.composite})
    for m in kmods:
        w(f"from ember.kernels import {m} as _k_{m}")
    cmods = sorted({op.composite.rsplit(".", 1)[0] for op in ops if op.composite})
    for m in cmods:
        w(f"from ember.ops import {m} as _c_{m}")
    w("from ember.autograd import formulas as _F")
    w("from ember.autograd.dispatch import Op, dispatch, dispatch_inplace")
    w("from ember.autograd.node import Node, next_seq, unpack")
    w("from ember.autograd.formulas import _save, _save_out, _shape, _dtype, _geometry")
    w("from ember.kernels import constants as _C")
    w("")
    w("OPS = {}")
    w("")
    for op in ops:
        if op.differentiable and not op.composite:
            emit_backward(op, w)
    for op in ops:
        emit_op(op, w)
    for op in ops:
        emit_function(op, w)
    # exports and methods
    ns = {"ember": [], "functional": [], "internal": []}
    methods, operators = {}, {}
    for op in ops:
        e = op.entry
        ns[e.get("namespace", "ember")].append(op.name)
        variants = [v.strip() for v in str(e.get("variants", "function, method")).split(",")]
        if "method" in variants:
            methods[op.name] = op.name
        if e.get("inplace"):
            methods[op.name + "_"] = op.name + "_"
        for spec_op in e.get("operators", []):
            dunder, _, how = spec_op.partition(":")
            operators[dunder] = (op.name, how)
    infix, prefix = {}, {}
    for op in ops:
        for spec_op in op.entry.get("operators", []):
            dunder, _, how = spec_op.partition(":")
            sym = PY_OPERATORS.get(dunder)
            if sym is None or how in ("reverse", "inplace"):
                continue
            when = {a.name: ast.literal_eval(py_default(a)) for a in op.const_args
                    if a.default is not None}
            if how.startswith("kw="):
                k, _, v = how[3:].partition("=")
                when[k] = ast.literal_eval(v)
            (prefix if how == "unary" else infix)[sym] = (op.name, when)
    w("# Python operator -> (spec op, the constants under which the op is that operator)")
    w(f"INFIX = {infix!r}")
    w(f"PREFIX = {prefix!r}")
    w(f"EMBER_FUNCTIONS = {tuple(ns['ember'])!r}")
    w(f"FUNCTIONAL = {tuple(ns['functional'])!r}")
    w("")
    for dunder, (name, how) in operators.items():
        if how == "reverse":
            w(f"def _op{dunder}(self, other):")
            w(f"    return {name}(other, self)")
            w("")
        elif how.startswith("kw="):
            w(f"def _op{dunder}(self, other):")
            w(f"    return {name}(self, other, {how[3:]})")
            w("")
        elif how == "unary":
            w(f"def _op{dunder}(self):")
            w(f"    return {name}(self)")
            w("")
    w("TENSOR_METHODS = {")
    for m, fn in methods.items():
        w(f"    {m!r}: {fn},")
    for dunder, (name, how) in operators.items():
        if how in ("reverse", "unary") or how.startswith("kw="):
            w(f"    {dunder!r}: _op{dunder},")
        elif how == "inplace":
            w(f"    {dunder!r}: {name}_,")
        else:
            w(f"    {dunder!r}: {name},")
    w("}")
    outputs = {OUT: "\n".join(lines) + "\n", OUT_POINTWISE: emit_pointwise_module(ops)}
    if "--out-dir" in sys.argv:
        out_dir = sys.argv[sys.argv.index("--out-dir") + 1]
        outputs = {os.path.join(out_dir, os.path.basename(p)): src for p, src in outputs.items()}
    if "--check" in sys.argv:
        stale = []
        for path, src in outputs.items():
            try:
                with open(path) as fh:
                    cur = fh.read()
            except FileNotFoundError:
                cur = None
            if cur != src:
                stale.append(path if "--out-dir" in sys.argv else os.path.relpath(path, ROOT))
        if stale:
            print(f"{', '.join(stale)} stale: run python tools/gen_autograd.py")
            return 1
        print("generated code is up to date")
        return 0
    for path, src in outputs.items():
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(src)
        os.replace(tmp, path)
        print(f"wrote {path if '--out-dir' in sys.argv else os.path.relpath(path, ROOT)}")
    print(f"{len(ops)} ops, {sum(op.pointwise is not None for op in ops)} pointwise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
