"""Rewrites of a captured training step's joint (forward + backward + update) graph, run by
``ember.compiler.step.WholeStep`` around the jit's pass pipeline (``PIPELINE``): each replaces a
pattern the traced derivative formulas leave with fewer or cheaper passes over memory, equal to
the original up to rounding (each docstring says where and what it saves).
"""
import math

import numpy as np

__all__ = ["prepare", "finish"]


def prepare(g):
    """The rewrites that run before the pass pipeline, in order."""
    return _merged_heads(_masked_softmax_in_one_pass(_gelu_cdf_from_output(
        _channel_sums_as_gemv(_relu_after_max_pool(_array_only(g))))))


def finish(g):
    """The rewrite after the pipeline (its fusion groups exist then)."""
    return _in_place(g)


def _array_only(g):
    """The step runs in array mode only: ``detach`` is the identity and ``copy`` of a value of
    the target's dtype and shape is the value itself (the ``copy_`` after it writes it)."""
    for n in list(g.nodes):
        if n.kind == "detach" or (n.kind == "copy" and len(n.args) >= 2 and
                                  _same(n.args[1], n.output)):
            n.output.replace_all_uses_with(n.args[0] if n.kind == "detach" else n.args[1])
            g.remove(n)
    return g


def _zero(g, v):
    """Whether ``v`` (an argument) is the number 0: a Python 0 or a 0-d zero constant."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v == 0
    node = getattr(v, "node", None)
    if node is None or node.kind != "constant":
        return False
    c = g.constants.get(node.attrs.get("name"))
    return c is not None and c.shape == () and c == 0


def _relu_after_max_pool(g):
    """``max_pool2d_with_indices(relu(%z))`` (a CNN's conv, ReLU, pool), the ReLU's output read
    otherwise only by its backward mask over the pool's gradient scatter (``where(le(%a, 0), 0,
    max_pool2d_backward(%g, %idx))``), becomes ``relu(max_pool2d_with_indices(%z))`` with the
    mask applied to the pooled gradient before the scatter (``max_pool2d_backward(where(le(%y,
    0), 0, %g), %idx)``): the ReLU and its mask run on the pooled size (a 2x2 pool: a quarter)
    and the full-size ReLU output is not kept for the backward. Equal: ReLU is monotone, so the
    pooled values are the same; each scattered gradient lands where the window's maximum is,
    whose ReLU value is the pooled one, so the mask per window is the mask at that position;
    where the maximum is <= 0 the raw window's argmax may differ, but its gradient is 0 either
    way (NaN: the same last-NaN position, its gradient kept as before)."""
    written = {id(n.args[0]) for n in g.nodes if n.kind == "copy_"}
    for r in list(g.find_nodes("relu")):
        z, a = r.args[0], r.outputs[0]
        if not hasattr(z, "shape") or z.dtype.kind != "f" or a.dtype != z.dtype or \
                tuple(a.shape) != tuple(z.shape) or a in g.outputs or id(a) in written:
            continue
        pools = [n for n in a.users if n.kind == "max_pool2d_with_indices"]
        if len(pools) != 1 or pools[0].args[0] is not a:
            continue
        pool = pools[0]
        y, idx = pool.outputs
        masks = []   # (le, where, max_pool2d_backward) per backward mask
        for n in a.users:
            if n is pool:
                continue
            w = list(n.outputs[0].users) if n.kind == "le" and n.outputs else []
            if n.kind != "le" or n.args[0] is not a or not _zero(g, n.args[1]) or \
                    len(w) != 1 or w[0].kind != "where" or n.outputs[0] in g.outputs:
                masks = None
                break
            w = w[0]
            b = getattr(w.args[2], "node", None) if len(w.args) == 3 else None
            if w.args[0] is not n.outputs[0] or not _zero(g, w.args[1]) or b is None or \
                    b.kind != "max_pool2d_backward" or b.args[1] is not idx or \
                    list(b.outputs[0].users) != [w] or b.outputs[0] in g.outputs or \
                    w.outputs[0].dtype != b.outputs[0].dtype:
                masks = None
                break
            masks.append((n, w, b))
        if not masks or y in g.outputs or idx in g.outputs or \
                any(u.kind != "max_pool2d_backward" for u in idx.users) or \
                len(list(idx.users)) != len(masks):
            continue
        p2 = g.add_node("max_pool2d_with_indices", [z], dict(pool.attrs),
                        [(y.dtype, tuple(y.shape)), (idx.dtype, tuple(idx.shape))], before=pool)
        y2 = g.add_node("relu", [p2.outputs[0]], dict(r.attrs), [(y.dtype, tuple(y.shape))],
                        before=pool).outputs[0]
        y.replace_all_uses_with(y2)
        idx.replace_all_uses_with(p2.outputs[1])
        for le, w, b in masks:
            gy = b.args[0]
            m = g.add_node("le", [y2, 0], {}, [(np.dtype(np.bool_), tuple(y.shape))],
                           before=b).outputs[0]
            masked = g.add_node("where", [m, 0.0, gy], {}, [(gy.dtype, tuple(gy.shape))],
                                before=b).outputs[0]
            out = g.add_node("max_pool2d_backward", [masked] + list(b.args[1:]), dict(b.attrs),
                             [(b.outputs[0].dtype, tuple(b.outputs[0].shape))], before=b)
            w.outputs[0].replace_all_uses_with(out.outputs[0])
            g.remove(w)
            g.remove(le)
            g.remove(b)
        g.remove(pool)
        g.remove(r)
    return g


# |x| below which _gelu_cdf_from_output takes Phi(x) as 0.5 (exact there in float32 and float64;
# above it gelu(x) = x Phi(x) is a normal number, so gelu(x) / x keeps Phi's precision)
GELU_CDF_TINY = 1e-30


def _gelu_cdf_from_output(g):
    """Exact GELU's backward formula recomputes ``Phi(x) = 0.5 (1 + erf(x / sqrt 2))`` of the
    input whose forward ``gelu(%x)`` the graph already computed (and keeps: the next layer's
    weight gradient reads it): that ``Phi(%x)`` becomes ``where(|%x| < GELU_CDF_TINY, 0.5,
    gelu(%x) / %x)`` (the divisor 1 where |%x| is tiny), pointwise, so the gradient's fusion
    group reads ``gelu(%x)`` instead of evaluating an ``erf`` (a float64 rational function per
    element: the GPT step's group over (16, 64, 512) float32, 2.3 -> 1.0 ms). float32 and
    float64 only; equal to Phi up to a few ulp (float32's cancellation in 1 + erf at x < -3
    stays what it was in the forward)."""
    import ember.kernels.constants as C
    pos = {id(n): i for i, n in enumerate(g.nodes)}
    written = {id(n.args[0]) for n in g.nodes if n.kind == "copy_"}
    dead = []

    def only_user(v, kind):
        users = list(v.users)
        if len(users) != 1 or v in g.outputs or users[0].kind != kind:
            return None
        return users[0]

    for ge in list(g.find_nodes("gelu")):
        x, y = ge.args[0], ge.outputs[0]
        if ge.attrs.get("approximate", "none") != "none" or not hasattr(x, "shape") or \
                x.dtype not in (np.float32, np.float64) or y.dtype != x.dtype or \
                tuple(y.shape) != tuple(x.shape) or id(x) in written or id(y) in written:
            continue
        for m in list(x.users):
            if m.kind != "mul" or len(m.args) != 2 or m.args[0] is not x or \
                    not isinstance(m.args[1], float) or m.args[1] != C.SQRT1_2 or \
                    pos[id(m)] < pos[id(ge)]:
                continue
            erf = only_user(m.outputs[0], "erf")
            one = erf and only_user(erf.outputs[0], "add")
            half = one and only_user(one.outputs[0], "mul")
            if not half or tuple(one.args[1:]) != (1.0,) or one.attrs.get("alpha", 1) != 1 or \
                    one.args[0] is not erf.outputs[0] or half.args[0] is not one.outputs[0] or \
                    tuple(half.args[1:]) != (0.5,):
                continue
            out = half.outputs[0]
            if out.dtype != x.dtype or tuple(out.shape) != tuple(x.shape):
                continue
            t = (x.dtype, tuple(x.shape))
            b = (np.dtype(np.bool_), tuple(x.shape))
            ax = g.add_node("abs", [x], {}, [t], before=half).outputs[0]
            tiny = g.add_node("lt", [ax, GELU_CDF_TINY], {}, [b], before=half).outputs[0]
            # the divisor 1 where |x| is tiny: no 0 / 0 evaluated (NumPy would warn)
            d = g.add_node("where", [tiny, 1.0, x], {}, [t], before=half).outputs[0]
            q = g.add_node("div", [y, d], {"rounding_mode": None}, [t], before=half).outputs[0]
            cdf = g.add_node("where", [tiny, 0.5, q], {}, [t], before=half).outputs[0]
            out.replace_all_uses_with(cdf)
            dead += [half, one, erf, m]
    for n in dead:
        g.remove(n)
    return g


def _masked_softmax_in_one_pass(g):
    """The unfused attention's ``softmax(masked_fill(mul(%s, scale), %mask, -inf), -1)``, its
    product and masked scores read by nothing else (the backward reads the probabilities and
    the mask), becomes ``scaled_masked_softmax(%s, %mask, scale)``: one row pass writing the
    probabilities (float32 with one mask for all leading dims: nn_numba's kernel, equal up to
    the sum's last bits), no product or masked-scores array (the GPT step's (16, 4, 64, 64)
    float32 scores: the three ops ~0.8 ms, the pass ~0.5 ms per layer, one thread)."""
    written = {id(n.args[0]) for n in g.nodes if n.kind == "copy_"}

    def single(v, node):
        return v.node is not None and v not in g.outputs and id(v) not in written and \
            list(v.users) == [node]

    for sm in list(g.find_nodes("softmax")):
        mf = sm.args[0].node
        if mf is None or mf.kind != "masked_fill" or sm.attrs.get("dtype") is not None:
            continue
        out = sm.outputs[0]
        nd = len(out.shape)
        if nd == 0 or sm.attrs.get("dim") not in (-1, nd - 1) or not single(sm.args[0], sm):
            continue
        mu = mf.args[0].node
        if mu is None or mu.kind != "mul" or len(mf.args) != 3 or \
                not isinstance(mf.args[2], float) or mf.args[2] != -math.inf or \
                not single(mf.args[0], mf):
            continue
        x, scale = mu.args[0], mu.args[1]
        mask = mf.args[1]
        if not hasattr(x, "shape") or isinstance(scale, bool) or \
                not isinstance(scale, (int, float)) or not hasattr(mask, "shape") or \
                mask.dtype != np.bool_ or x.dtype.kind != "f" or out.dtype != x.dtype or \
                tuple(x.shape) != tuple(out.shape) or tuple(mu.outputs[0].shape) != tuple(x.shape):
            continue
        fused = g.add_node("scaled_masked_softmax", [x, mask], {"scale": float(scale)},
                           [(out.dtype, tuple(out.shape))], before=sm)
        out.replace_all_uses_with(fused.outputs[0])
        g.remove(sm)
        g.remove(mf)
        g.remove(mu)
        _masked_softmax_backward_in_one_pass(g, fused, single)
    return g


def _masked_softmax_backward_in_one_pass(g, fused, single):
    """The backward of ``fused`` (a ``scaled_masked_softmax``) as the traced formulas leave it,
    ``mul(where(%mask, 0.0, softmax_backward(%g, %y, -1)), scale)`` with the same mask and
    scale, each step read by the next alone, becomes ``scaled_masked_softmax_backward(%g, %y,
    %mask, scale)``: one row pass (the three ops' bits) where softmax_backward wrote an array
    and a fusion group read it again (the GPT step's (16, 4, 64, 64): ~0.2 -> ~0.1 ms)."""
    y = fused.outputs[0]
    mask, scale = fused.args[1], fused.attrs["scale"]
    for sb in [u for u in y.users if u.kind == "softmax_backward"]:
        if sb.args[1] is not y or sb.attrs.get("dim") not in (-1, len(y.shape) - 1) or \
                not single(sb.outputs[0], next(iter(sb.outputs[0].users), None)):
            continue
        wh = next(iter(sb.outputs[0].users))
        if wh.kind != "where" or len(wh.args) != 3 or wh.args[0] is not mask or \
                wh.args[2] is not sb.outputs[0] or isinstance(wh.args[1], bool) or \
                not isinstance(wh.args[1], (int, float)) or wh.args[1] != 0 or \
                not single(wh.outputs[0], next(iter(wh.outputs[0].users), None)):
            continue
        mu = next(iter(wh.outputs[0].users))
        if mu.kind != "mul" or len(mu.args) != 2 or mu.args[0] is not wh.outputs[0] or \
                isinstance(mu.args[1], bool) or not isinstance(mu.args[1], (int, float)) or \
                float(mu.args[1]) != scale or mu.outputs[0].dtype != y.dtype or \
                tuple(mu.outputs[0].shape) != tuple(y.shape):
            continue
        back = g.add_node("scaled_masked_softmax_backward", [sb.args[0], y, mask],
                          {"scale": scale}, [(y.dtype, tuple(y.shape))], before=mu)
        mu.outputs[0].replace_all_uses_with(back.outputs[0])
        g.remove(mu)
        g.remove(wh)
        g.remove(sb)


def _merged_heads(g):
    """``cat([reshape(transpose(%x, 1, 2), (B, T, H * D)), ...], 2)`` of 4-D (B, H, T, D)
    values of one shape (the q, k, v gradients of a fused attention projection), each
    transpose and reshape read by the cat alone, becomes ``merge_heads([%x, ...])``: one
    strided copy of each head where the reshape copied it and the cat copied it again (the GPT
    step's (16, 64, 384) float32: ~0.3 -> ~0.1 ms per layer). Equal bit for bit."""
    written = {id(n.args[0]) for n in g.nodes if n.kind == "copy_"}

    def only_for(v, node):
        return v.node is not None and v not in g.outputs and id(v) not in written and \
            list(v.users) == [node]

    for cat in list(g.find_nodes("cat")):
        parts = cat.args[0] if cat.args else None
        out = cat.outputs[0]
        if not isinstance(parts, (list, tuple)) or len(out.shape) != 3 or \
                cat.attrs.get("dim") not in (2, -1):
            continue
        heads, chain = [], []
        for v in parts:
            rs = v.node if hasattr(v, "node") else None
            if rs is None or rs.kind != "reshape" or not only_for(v, cat):
                break
            tr = rs.args[0].node
            if tr is None or tr.kind != "transpose" or not only_for(rs.args[0], rs) or \
                    {tr.attrs.get("dim0"), tr.attrs.get("dim1")} != {1, 2}:
                break
            x = tr.args[0]
            shape = tuple(getattr(x, "shape", ()))
            if len(shape) != 4 or tuple(v.shape) != (shape[0], shape[2], shape[1] * shape[3]) \
                    or (heads and (shape != tuple(heads[0].shape) or x.dtype != heads[0].dtype)):
                break
            heads.append(x)
            chain += [rs, tr]
        else:
            merged = g.add_node("merge_heads", [list(heads)], {},
                                [(out.dtype, tuple(out.shape))], before=cat)
            out.replace_all_uses_with(merged.outputs[0])
            g.remove(cat)
            for n in chain:
                g.remove(n)
    return g


# the fewest elements per (sample, channel) for which _channel_sums_as_gemv rewrites a sum
CHANNEL_SUM_GEMV_MIN = 16


def _channel_sums_as_gemv(g):
    """``sum(%x, dim=(0, 2, 3, ...))`` of a float (N, C, *spatial) value (a convolution's bias
    gradient) becomes ``sum(reshape(matmul(reshape(%x, (-1, HW)), ones(HW, 1)), (-1, C)), 0)``:
    the spatial sums as one GEMV over the N*C rows (into the memory plan's arena when it is on),
    then a sum over N. NumPy's strided reduction over (0, 2, 3) reads LeNet-5's (64, 6, 28, 28)
    gradient in ~90 us, the GEMV in ~20 (one thread). Equal up to rounding. (The fusion pass
    has no reduction epilogues, so the sum is not fused into the ReLU-mask group producing %x.)
    The reshapes hold no batch size, so a dynamic batch keeps one program."""
    for n in list(g.find_nodes("sum")):
        x = n.args[0]
        shape = tuple(getattr(x, "shape", ()))
        nd = len(shape)
        dims = n.attrs.get("dim")
        if nd < 3 or x.dtype.kind != "f" or n.attrs.get("keepdim") or \
                n.attrs.get("dtype") is not None or not isinstance(dims, tuple) or \
                len(n.outputs) != 1 or n.output.dtype != x.dtype:
            continue
        if sorted(d % nd for d in dims) != [0] + list(range(2, nd)):
            continue
        hw = math.prod(shape[2:])
        if hw < CHANNEL_SUM_GEMV_MIN:
            continue
        rows = g.add_node("reshape", [x], {"shape": (-1, hw)},
                          [(x.dtype, (shape[0] * shape[1], hw))], before=n).output
        ones = g.add_constant(np.ones((hw, 1), x.dtype), before=n)
        sums = g.add_node("matmul", [rows, ones], {}, [(x.dtype, (shape[0] * shape[1], 1))],
                          before=n).output
        per_sample = g.add_node("reshape", [sums], {"shape": (-1, shape[1])},
                                [(x.dtype, shape[:2])], before=n).output
        total = g.add_node("sum", [per_sample], {"dim": (0,), "keepdim": False, "dtype": None},
                           [(x.dtype, (shape[1],))], before=n).output
        n.output.replace_all_uses_with(total)
        g.remove(n)
    return g


def _same(a, b):
    return hasattr(a, "shape") and a.shape == b.shape and a.dtype == b.dtype


def _in_place(g):
    """``copy_(%state, %new)`` with ``%new`` an output of a fusion group that reads
    ``%state``: the group writes that output into ``%state``'s memory (``attrs["into"]``,
    ``FusedGroup.run_arrays_into``) and the copy goes: the optimizer's update is one pass over
    each parameter and its state, as eager's fused step. Only when nothing between the group and
    the copy reads ``%state`` or a value computed from it."""
    order = list(g.nodes)
    pos = {id(n): i for i, n in enumerate(order)}
    for c in order:
        if c.kind != "copy_":
            continue
        target, new = c.args[0], c.args[1]
        grp = getattr(new, "node", None)
        if target.node is not None or grp is None or grp.kind != "fusion_group" or \
                not _same(target, new) or target not in grp.args or c.output in g.outputs:
            continue
        into = list(grp.attrs.get("into") or [None] * len(grp.outputs))
        if into[new.index] is not None or grp.args.index(target) in into:
            continue
        readers = {id(n) for n in target.users}
        derived = [o for n in target.users if n is not grp for o in n.outputs]
        between = [n for n in order[pos[id(grp)] + 1:pos[id(c)]] if n.graph is g]
        if any(id(n) in readers or any(d in n.args for d in derived) for n in between):
            continue
        into[new.index] = grp.args.index(target)
        grp.attrs["into"] = tuple(into)
        c.output.replace_all_uses_with(new)
        g.remove(c)
    g.lint()
    return g
