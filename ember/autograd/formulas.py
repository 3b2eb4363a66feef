"""Helpers used by derivative formulas in the op spec, written in ember ops (so that double
backward works). The generator prefixes these names with ``_F.``; names starting with ``_``
are used by generated code itself.

The helpers of pointwise ops take their ops from ``_ops(grad)``: the generated Tensor ops, or,
when a fused backward is derived, the same ops' pointwise forms on symbolic values
(``ember.autograd._generated.pointwise``). One helper thus serves eager autograd and the fused
kernels."""
import numpy as np

from ember.autograd._generated import functions as G
from ember.autograd.node import SavedTensor
from ember.errors import EmberRuntimeError, UnsupportedError
from ember.kernels import constants as C
from ember.kernels.linalg import explicit_einsum
from ember.kernels.opmath import F32 as _F32, is_reduced
from ember.kernels.shape import broadcast_axes
from ember.tensor import Tensor


def _save(x, name):
    if isinstance(x, Tensor):
        if x._inference:
            raise EmberRuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors "
                "created in inference mode in computation tracked by autograd. To work around "
                "this, you can make a clone to get a normal tensor and use it in autograd, or use "
                "`torch.no_grad()` instead of `torch.inference_mode()`.")
        return SavedTensor(x, name)
    return x


def _save_out(x, name, nr):
    return SavedTensor(x, name, nr)


def _shape(x):
    return x._data.shape if isinstance(x, Tensor) else ()


def _dtype(x):
    return x._data.dtype if isinstance(x, Tensor) else None


def _geometry(x):
    """``(shape, strides in elements, storage offset)`` of tensor ``x`` (``x.geometry`` in a
    formula): what a view of its storage needs, without keeping ``x``."""
    from ember.kernels import strided
    a = x._data
    return tuple(a.shape), tuple(st // a.itemsize for st in a.strides), strided.storage(a)[1]


def _arr(t):
    """The array of ``t`` (None stays None): a backward kernel's argument."""
    return None if t is None else t._data


def _const(arr):
    return Tensor._make(arr)


def _varargs(args):
    """Accept ``f(2, 3)`` and ``f((2, 3))`` alike; returns a tuple."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _varargs_or_keyword(args, kwargs, name, op):
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f(name=(2, 3))`` alike (torch's int-list varargs
    also go by their keyword); returns a tuple. Raises TypeError, as Python would, for another
    keyword or for the keyword given after positional values."""
    if kwargs:
        for k in kwargs:
            if k != name:
                raise TypeError(f"{op}() got an unexpected keyword argument '{k}'")
        if args:
            raise TypeError(f"{op}() got multiple values for argument '{name}'")
        args = (kwargs[name],)
    return _varargs(args)


def _ops(grad):
    """The op namespace for ``grad``: ember's ops for a Tensor, their pointwise forms for a
    symbolic value (see the module docstring)."""
    if isinstance(grad, Tensor):
        return G
    from ember.autograd._generated import pointwise as P
    return P


def _zero(x):
    """A zero operand of ``x``'s dtype: a 0-d constant tensor, or ``0.0`` for a symbolic value
    (the pointwise engine keeps a Python number at the other operand's dtype)."""
    return zeros((), x._data.dtype) if isinstance(x, Tensor) else 0.0


def _float32(*xs):
    """``(xs, low)``: float16/bfloat16 Tensors among ``xs`` as float32 and that dtype (None when
    there are none, or for symbolic values). The backward kernels torch runs for these dtypes
    compute in float32 and round once; a formula computing through ``to`` (differentiable)
    does the same, ``_round_back`` rounding its results."""
    low = None
    for x in xs:
        if isinstance(x, Tensor) and is_reduced(x._data.dtype):
            low = x._data.dtype
            break
    if low is None or any(isinstance(x, Tensor) and x._data.ndim and x._data.dtype != low
                          and x._data.dtype.kind in "fcV" for x in xs):
        return xs, None   # none, or a wider floating operand: torch's result is that dtype
    return tuple(G.to(x, _F32) if isinstance(x, Tensor) and x._data.dtype == low else x
                 for x in xs), low


def _round_back(t, low):
    return t if low is None or t is None else G.to(t, low)


def zeros_for(grad, shape):
    """A zero tensor of ``shape`` with ``grad``'s dtype (a constant, outside the graph); for a
    symbolic ``grad`` the pointwise engine's ``ZERO`` (a gradient known to be all zeros)."""
    if not isinstance(grad, Tensor):
        from ember.kernels.pointwise.autodiff import ZERO
        return ZERO
    return _const(np.zeros(tuple(shape), grad._data.dtype))


def zeros(shape, dtype):
    return _const(np.zeros(tuple(shape), dtype))


def sum_to(grad, shape):
    """Sum ``grad`` down to ``shape`` (undo broadcasting)."""
    if grad is None:
        return None
    shape = tuple(shape)
    if grad._data.shape == shape:
        return grad
    dims = broadcast_axes(grad._data.shape, shape)
    if dims:
        grad = G.sum(grad, dims, True)
    if grad._data.shape != shape:
        grad = G.reshape(grad, shape)
    return grad


def _reduced_dims(shape, dim):
    n = len(shape)
    if dim is None or dim == () or dim == []:
        return tuple(range(n))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted(d % n for d in dim)) if n else ()


def expand_reduced(grad, shape, dim, keepdim):
    """Broadcast the gradient of a reduction back to the input ``shape``."""
    shape = tuple(shape)
    if not keepdim:
        dims = _reduced_dims(shape, dim)
        if dims and len(grad._data.shape) != len(shape):
            grad = G.reshape(grad, tuple(1 if i in dims else s for i, s in enumerate(shape)))
    elif len(grad._data.shape) != len(shape):
        grad = G.reshape(grad, tuple(1 for _ in shape))
    return G.expand(grad, shape)


def reduced_count(shape, dim):
    n = 1
    for d in _reduced_dims(shape, dim):
        n *= shape[d]
    return n


def even_tie_grad(grad, self, result):
    """Gradient of a full max/min/median: split evenly among the elements equal to the result
    (among the NaNs when the result is NaN, as torch)."""
    eq = G.eq(self, result)
    if result._data.dtype.kind == "f" and np.isnan(result._data).any():
        eq = G.logical_or(eq, G.isnan(self))
    mask = G.to(eq, self._data.dtype)
    return G.div(G.mul(mask, grad), G.sum(mask))


def ties_grad(grad, self, result, dim, keepdim):
    """Gradient of amax/amin over ``dim``: split evenly among ties."""
    shape = self._data.shape
    r = expand_reduced(result, shape, dim, keepdim)
    mask = G.to(G.eq(self, r), self._data.dtype)
    count = G.sum(mask, _reduced_dims(shape, dim), True)
    return G.div(G.mul(mask, expand_reduced(grad, shape, dim, keepdim)), count)


def index_reduction_grad(grad, indices, shape, dim, keepdim):
    """Gradient of max/min along ``dim``: route ``grad`` to the selected indices."""
    if len(shape) == 0:
        return grad
    d = dim % len(shape)
    if not keepdim:
        grad = G.unsqueeze(grad, d)
        indices = G.unsqueeze(indices, d)
    return G.scatter(zeros(shape, grad._data.dtype), d, indices, grad)


def var_grad(grad, self, dim, correction, keepdim):
    """torch's var_backward: ``(2 / (n - correction)) * grad * (self - mean)``, in that order."""
    shape = self._data.shape
    n = reduced_count(shape, dim)
    mean = G.mean(self, _reduced_dims(shape, dim), True)
    g = expand_reduced(grad, shape, dim, keepdim)
    scale = 2.0 / (n - correction) if n - correction > 0 else float("nan")
    return G.mul(G.mul(g, scale), G.sub(self, mean))


def std_grad(grad, self, result, dim, correction, keepdim):
    """torch's std_backward: var's gradient of ``grad / (2 * result)``, 0 where the result is 0
    (a constant slice)."""
    shape = self._data.shape
    r = expand_reduced(result, shape, dim, keepdim)
    zero = G.eq(r, 0)
    gv = G.masked_fill(G.div(expand_reduced(grad, shape, dim, keepdim), G.mul(r, 2.0)), zero, 0.0)
    return var_grad(gv, self, dim, correction, True)


def logsumexp_grad(grad, self, result, dim, keepdim):
    shape = self._data.shape
    return G.mul(expand_reduced(grad, shape, dim, keepdim),
                 G.exp(G.sub(self, expand_reduced(result, shape, dim, keepdim))))


def norm_grad(grad, self, result, p, dim, keepdim):
    shape = self._data.shape
    if p in (0, 0.0):  # counts the nonzeros: zero gradient (torch)
        return G.zeros_like(self)
    if p in (2, 2.0, "fro"):
        # torch's grad * (self / norm), 0 where the norm is 0; the masks at the norm's (reduced)
        # shape, so two passes over self's size, not five: where the norm is 0, self is 0 and
        # its gradient 0 * 0. (32, 64, 128) float32 over the last dim, forward + backward
        # 0.70 -> ~0.3 ms
        zero = G.eq(result, 0)
        q = expand_reduced(G.masked_fill(grad, zero, 0.0), shape, dim, keepdim)
        r = expand_reduced(G.masked_fill(result, zero, 1.0), shape, dim, keepdim)
        return G.mul(q, G.div(self, r))
    g = expand_reduced(grad, shape, dim, keepdim)
    if p in (1, 1.0):
        return G.mul(G.sign(self), g)
    if p in (float("inf"), float("-inf"), "inf"):
        ab = G.abs(self)
        return G.mul(G.sign(self), ties_grad(grad, ab, result, dim, keepdim))
    r = expand_reduced(result, shape, dim, keepdim)
    ab = G.abs(self)
    # zero where the element or the norm is zero (torch's subgradient), finite for create_graph
    zero = G.logical_or(G.eq(ab, 0), G.eq(r, 0))
    ratio = G.div(G.masked_fill(ab, zero, 1.0), G.masked_fill(r, zero, 1.0))
    return G.masked_fill(G.mul(G.mul(G.sign(self), G.pow(ratio, p - 1)), g), zero, 0.0)


def prod_grad(grad, self, result, dim, keepdim):
    """Gradient of prod (torch's prod_backward): ``grad * (result / self)`` without zeros, else
    the product of the other elements as exclusive cumulative products from both sides (O(n),
    exact with any number of zeros). Written in ops, so higher derivatives are exact too."""
    shape = self._data.shape
    if len(shape) == 0:  # the product of one element
        return grad
    if not np.any(self._data == 0):
        return G.mul(expand_reduced(grad, shape, dim, keepdim),
                     G.div(expand_reduced(result, shape, dim, keepdim), self))
    g = expand_reduced(grad, shape, dim, keepdim)
    if dim is None:
        return G.mul(g, G.reshape(_prod_others(G.reshape(self, (-1,)), 0), shape))
    return G.mul(g, _prod_others(self, dim % len(shape)))


def _prod_others(x, d):
    """For each element along ``d``, the product of the other elements there: the exclusive
    cumulative products from the front and from the back, multiplied (safe with zeros)."""
    n = x._data.shape[d]
    one_shape = list(x._data.shape)
    one_shape[d] = 1
    ones = _const(np.ones(one_shape, x._data.dtype))
    front = G.cumprod(G.cat([ones, G.narrow(x, d, 0, n - 1)], d), d)
    back = G.flip(G.cumprod(G.cat([ones, G.flip(G.narrow(x, d, 1, n - 1), (d,))], d), d), (d,))
    return G.mul(front, back)


def cumsum_grad(grad, dim):
    return G.flip(G.cumsum(G.flip(grad, (dim,)), dim), (dim,))


def _in_dtype_of(grad, x):
    """``grad`` in tensor ``x``'s dtype: torch's engine casts each gradient to the dtype of the
    output it belongs to, so formulas whose ops refuse mixed dtypes (products) never see a wider
    gradient (a float64 loss term over a float32 product)."""
    if grad is None or grad._data.dtype == x._data.dtype:
        return grad
    return grad.to(x.dtype)


def matmul_grad_a(grad, a, b):
    """d(a @ b)/da for every torch rank case."""
    grad = _in_dtype_of(grad, a)
    if a.dim() == 1 and b.dim() == 1:
        return G.mul(grad, b)
    if b.dim() == 1:
        g = G.unsqueeze(grad, -1)
        return sum_to(G.mul(g, b), a._data.shape)
    if a.dim() == 1:
        r = G.matmul(G.unsqueeze(grad, -2), G.transpose(b, -1, -2))
        return G.sum(G.reshape(r, (-1, a._data.shape[0])), (0,), False)
    return sum_to(G.matmul(grad, G.transpose(b, -1, -2)), a._data.shape)


def matmul_grad_b(grad, a, b):
    """d(a @ b)/db for every torch rank case."""
    grad = _in_dtype_of(grad, b)
    if a.dim() == 1 and b.dim() == 1:
        return G.mul(grad, a)
    if a.dim() == 1:
        g = G.unsqueeze(grad, -2)
        r = G.matmul(G.unsqueeze(a, -1), g)
        return sum_to(r, b._data.shape)
    if b.dim() == 1:
        g = G.unsqueeze(grad, -1)
        r = G.matmul(G.transpose(a, -1, -2), g)
        r = G.squeeze(r, -1)
        return G.sum(G.reshape(r, (-1, b._data.shape[0])), (0,), False)
    return sum_to(G.matmul(G.transpose(a, -1, -2), grad), b._data.shape)


def linear_input_grad(grad, weight):
    """d linear(x, W) / dx: ``grad @ W``."""
    return G.matmul(grad, weight)


def linear_weight_grad(grad, x):
    """d linear(x, W) / dW: ``grad^T @ x`` over the flattened leading dimensions."""
    g2 = G.reshape(grad, (-1, grad._data.shape[-1])) if grad.dim() != 2 else grad
    x2 = G.reshape(x, (-1, x._data.shape[-1])) if x.dim() != 2 else x
    if grad.dim() == 1:
        return G.outer(grad, x)
    return G.mm(G.t(g2), x2)


def linear_bias_grad(grad):
    """d linear / d bias: ``grad`` summed over every dimension but the last."""
    nd = grad._data.ndim
    if nd <= 1:
        return grad
    return G.sum(grad, tuple(range(nd - 1)), False)


def einsum_grad(grad, operands, equation, i):
    """Gradient of einsum w.r.t. operand ``i``: an einsum of ``grad`` with the other operands
    (broadcast to full size), summed back over the operand's broadcast size-1 dimensions, with
    a repeated subscript (a diagonal) written back through identity matrices."""
    subs, rhs = explicit_einsum(equation, [o.shape for o in operands])
    sizes = {}
    for s, o in zip(subs, operands):
        for c, n in zip(s, o.shape):
            if sizes.get(c, 1) == 1:      # a size-1 dimension broadcasts (to 0 too)
                sizes[c] = n
    full = [G.expand(o, tuple(sizes[c] for c in s)) if o.shape != tuple(sizes[c] for c in s)
            else o for s, o in zip(subs, operands)]
    mine = subs[i]
    others = [s for j, s in enumerate(subs) if j != i]
    avail = set(rhs).union(*others)
    unique = "".join(dict.fromkeys(mine))
    kept = "".join(c for c in unique if c in avail)
    g = G.einsum(",".join([rhs] + others) + "->" + kept,
                 [grad] + [o for j, o in enumerate(full) if j != i])
    if kept != unique:       # a letter only this operand has: its gradient is constant along it
        g = G.expand(G.reshape(g, tuple(sizes[c] if c in avail else 1 for c in unique)),
                     tuple(sizes[c] for c in unique))
    if unique != mine:       # 'ii->i': the gradient lies on the diagonal
        fresh = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 if c not in "".join(subs) + rhs]
        out, eyes, terms = "", [], [unique]
        for k, c in enumerate(mine):
            if c in mine[:k]:
                f = fresh.pop(0)
                out += f
                terms.append(c + f)
                eyes.append(G.eye(sizes[c], None, grad._data.dtype))
            else:
                out += c
        g = G.einsum(",".join(terms) + "->" + out, [g] + eyes)
    shape = tuple(operands[i].shape)
    if g.shape != shape:     # dimensions of size 1 that broadcast
        g = G.sum(g, tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1), True)
    return g


def einsum_grads(grad, operands, equation):
    return [einsum_grad(grad, operands, equation, i) for i in range(len(operands))]


def _transpose_grad_geometry(grad, padding, output_padding):
    """The backward of a 2-d transposed convolution is a convolution of ``grad``: padded (p, p -
    output_padding) per axis, a negative end meaning the trailing rows no input reaches, cropped
    (torch's output_padding may reach the stride when below the dilation)."""
    def pair(v):
        return (int(v),) * 2 if isinstance(v, (int, np.integer)) else tuple(v)

    pad4 = []
    for i, (p, op) in enumerate(zip(pair(padding), pair(output_padding))):
        end = p - op
        if end < 0:
            axis = grad.ndim - 2 + i
            grad = G.narrow(grad, axis, 0, grad.shape[axis] + end)
        pad4 += [p, max(end, 0)]
    return grad, tuple(pad4)


def conv_transpose2d_input_grad_of(grad, weight, stride, padding, output_padding, dilation,
                                   groups):
    g, pad4 = _transpose_grad_geometry(grad, padding, output_padding)
    return G.conv2d(g, weight, None, stride, pad4, dilation, groups)


def conv_transpose2d_weight_grad_of(input, grad, weight_shape, stride, padding, output_padding,
                                    dilation, groups):
    g, pad4 = _transpose_grad_geometry(grad, padding, output_padding)
    return G.conv2d_weight_grad(input, g, weight_shape, stride, pad4, dilation, groups)


def not_implemented(what):
    """The formula of an input whose derivative torch does not implement either: raises when
    a backward needs it (the forward, and the other inputs' gradients, run), with torch's
    message."""
    raise UnsupportedError(f"the derivative for '{what}' is not implemented.")


def _scatter_multiply_grad(reduce):
    if reduce == "multiply":
        raise UnsupportedError("scatter: the derivative of reduce='multiply' is not implemented "
                               "(as in torch)")


def scatter_self_grad(grad, dim, index, reduce):
    _scatter_multiply_grad(reduce)
    return grad if reduce == "add" else G.scatter(grad, dim, index, 0.0)


def scatter_src_grad(grad, dim, index, reduce):
    _scatter_multiply_grad(reduce)
    return G.gather(grad, dim, index)


def cat_grads(grad, shapes, dim):
    nd = grad.ndim  # not shapes[0]: cat skips legacy 1-d empty inputs of another rank
    d = dim % nd if nd else 0
    sizes = [s[d] if len(s) == nd else 0 for s in shapes]
    parts = G.split_with_sizes(grad, sizes, d)
    return [p if len(s) == nd else zeros(s, grad._data.dtype) for p, s in zip(parts, shapes)]


def permute_inverse(dims):
    n = len(dims)
    inv = [0] * n
    for i, d in enumerate(dims):
        inv[d % n] = i
    return tuple(inv)


def repeat_grad(grad, shape, repeats):
    """Sum the tiles of ``repeat`` back into the input shape."""
    shape = tuple(shape)
    lead = len(repeats) - len(shape)
    full = (1,) * lead + shape
    split = []
    for r, s in zip(repeats, full):
        split += [r, s]
    g = G.reshape(grad, tuple(split))
    g = G.sum(g, tuple(range(0, 2 * len(full), 2)), False)
    return G.reshape(g, shape)


def tile_grad(grad, shape, dims):
    dims = tuple(dims)
    if len(dims) < len(shape):
        dims = (1,) * (len(shape) - len(dims)) + dims
    return repeat_grad(grad, shape, dims)


def roll_grad(grad, shifts, dims):
    if isinstance(shifts, int):
        shifts = (shifts,)
    return G.roll(grad, tuple(-s for s in shifts), dims)


def narrow_grad(grad, shape, dim, start, length):
    d = dim % len(shape)
    if start < 0:
        start += shape[d]
    # pad lists last dimension first, in (left, right) pairs
    pairs = []
    for ax in range(len(shape) - 1, d - 1, -1):
        pairs += [start, shape[d] - start - length] if ax == d else [0, 0]
    return G.pad(grad, tuple(pairs), "constant", 0.0)


def where_grad(grad, condition, take_first):
    O, z = _ops(grad), _zero(grad)
    return O.where(condition, grad, z) if take_first else O.where(condition, z, grad)


def relu_grad(grad, result):
    """Gradient of relu from its output: 0 where ``result <= 0``, else ``grad`` (torch's
    ``threshold_backward``: a NaN result passes the gradient)."""
    O = _ops(grad)
    return O.where(O.le(result, 0), _zero(grad), grad)


def clamp_grad(grad, self, min, max):
    O = _ops(grad)
    mask = None
    if min is not None:
        mask = O.ge(self, min)
    if max is not None:
        m2 = O.le(self, max)
        mask = m2 if mask is None else O.logical_and(mask, m2)
    return O.where(mask, grad, _zero(grad))


def clamp_bound_grad(grad, self, bound, other, is_min):
    """Gradient for a tensor ``min`` (``is_min``) or ``max`` bound of clamp (max wins on overlap)."""
    O = _ops(grad)
    if is_min:
        mask = O.lt(self, bound)
        if other is not None:
            mask = O.logical_and(mask, O.lt(bound, other))
    else:
        mask = O.gt(self, bound)
        if other is not None:
            mask = O.logical_or(mask, O.lt(bound, other))
    return O.where(mask, grad, _zero(grad))


def embedding_backward_grad(grad, indices, padding_idx, scale_grad_by_freq):
    """Derivative of embedding_backward w.r.t. its incoming gradient (a masked, scaled gather)."""
    out = G.embedding(indices, grad)
    n = grad._data.shape[0]
    if scale_grad_by_freq:
        flat = indices._data.reshape(-1) % n
        counts = np.bincount(flat, minlength=n)[indices._data % n].astype(grad._data.dtype)
        out = G.div(out, _const(counts[..., None]))
    if padding_idx is not None:
        keep = (indices._data % n) != (padding_idx % n)
        out = G.mul(out, _const(keep[..., None].astype(grad._data.dtype)))
    return out


def maximum_grad(grad, a, b, first):
    """Gradient of maximum/minimum: ties share the gradient equally, as torch does."""
    O, z = _ops(grad), _zero(grad)
    tie = O.where(O.eq(a, b), O.mul(grad, 0.5), z)
    return O.where(O.gt(a, b) if first else O.lt(a, b), grad, tie)


def minimum_grad(grad, a, b, first):
    return maximum_grad(grad, a, b, not first)


def pow_exponent_grad(grad, self, exponent, result):
    """d(self ** exponent)/d exponent as torch: ``grad * (result * log(self))``, with 0 where
    ``self`` is 0 and ``exponent >= 0`` (the limit from a positive base); hence -inf where
    ``self`` is 0 and ``exponent < 0``, and nan for a negative base (log of it)."""
    O = _ops(grad)
    if _is_complex(self) or _is_complex(exponent):
        return _pow_exponent_grad_complex(grad, self, exponent, result)
    if isinstance(self, (int, float, np.number)):
        lg = float(np.log(self)) if self > 0 else float("-inf") if self == 0 else float("nan")
        r = O.mul(result, lg)
        return O.mul(grad, O.where(O.ge(exponent, 0), _zero(grad), r) if self == 0 else r)
    if isinstance(result, Tensor) and self._data.dtype != result._data.dtype:
        self = G.to(self, result._data.dtype)   # an integer base: its log in the result dtype
    r = O.mul(result, O.log(self))
    return O.mul(grad, O.where(O.logical_and(O.eq(self, 0), O.ge(exponent, 0)), _zero(grad), r))


def _is_complex(x):
    return isinstance(x, Tensor) and x._data.dtype.kind == "c"


def _pow_exponent_grad_complex(grad, self, exponent, result):
    """The holomorphic form ``grad * result * log(self)`` (0 where ``self`` is 0 and the
    exponent's real part is >= 0), for complex base or exponent (see complex_support)."""
    zero = G.eq(self, 0)
    r = G.mul(G.mul(grad, result), G.log(G.where(zero, 1.0, self)))
    e = G.real(exponent) if _is_complex(exponent) else exponent
    return G.where(G.logical_and(zero, G.ge(e, 0)), zeros((), r._data.dtype), r)


def pow_self_grad(grad, self, exponent):
    """d(self ** exponent)/d self as torch: ``grad * (exponent * self ** (exponent - 1))``, 0
    where the exponent is 0 (also at ``self == 0``, where the formula reads 0 * inf)."""
    O = _ops(grad)
    if isinstance(exponent, (int, float)):
        if exponent == 0:
            return zeros_for(grad, _shape(grad))
        return O.mul(grad, O.mul(O.pow(self, exponent - 1), exponent))
    d = O.mul(grad, O.mul(O.pow(self, O.sub(exponent, 1)), exponent))
    return O.where(O.eq(exponent, 0), _zero(grad), d)


def gelu_grad(grad, self, approximate):
    """Gradient of gelu (float16/bfloat16 computed in float32, rounded once, as torch)."""
    (grad, self), low = _float32(grad, self)
    return _round_back(_gelu_grad(grad, self, approximate), low)


def silu_grad(grad, self):
    """Gradient of silu: ``grad * s * (1 + self * (1 - s))``, ``s = sigmoid(self)`` (float16/
    bfloat16 computed in float32, rounded once, as torch)."""
    (grad, self), low = _float32(grad, self)
    s = _ops(grad).sigmoid(self)
    return _round_back(grad * s * (1 + self * (1 - s)), low)


def softmax_grad(grad, result, dim, dtype):
    """Gradient of softmax: ``result * (grad - sum(grad * result, dim))`` in the input's dtype
    (float16/bfloat16 computed in float32, rounded once, as torch)."""
    (grad, result), low = _float32(grad, result)
    if low is None and _traced_backward() and grad._data.dtype == result._data.dtype and \
            grad._data.shape == result._data.shape and result._data.dtype.kind == "f":
        # a traced backward (never differentiated again): one op, eager's one-pass kernel
        return cast_to(G.softmax_backward(grad, result, dim), dtype)
    g = G.mul(result, G.sub(grad, G.sum(G.mul(grad, result), (dim,), True)))
    return cast_to(g, dtype) if low is None else G.to(g, dtype)


def _gelu_grad(grad, self, approximate):
    O = _ops(grad)
    if approximate == "tanh":
        k, kappa = C.GELU_TANH_BETA, C.GELU_TANH_KAPPA
        x3 = O.mul(O.mul(self, self), self)
        t = O.tanh(O.mul(O.add(self, O.mul(x3, kappa)), k))
        dinner = O.mul(O.add(O.mul(O.mul(self, self), 3 * kappa), 1.0), k)
        left = O.mul(O.add(t, 1.0), 0.5)
        right = O.mul(O.mul(O.mul(self, 0.5), O.sub(1.0, O.mul(t, t))), dinner)
        return O.mul(grad, O.add(left, right))
    cdf = O.mul(O.add(O.erf(O.mul(self, C.SQRT1_2)), 1.0), 0.5)
    pdf = O.mul(O.exp(O.mul(O.mul(self, self), -0.5)), C.INV_SQRT_2PI)
    return O.mul(grad, O.add(cdf, O.mul(self, pdf)))


def softplus_grad(grad, self, beta, threshold):
    O = _ops(grad)
    z = O.mul(self, beta)
    return O.where(O.gt(z, threshold), grad, O.mul(grad, O.sigmoid(z)))


def elu_grad(grad, self, alpha, scale=1.0):
    O = _ops(grad)
    neg = O.mul(O.exp(O.minimum(self, _zero(self))), alpha * scale)
    return O.mul(grad, O.where(O.gt(self, 0), float(scale), neg))


def _traced_backward():
    """Whether ember.compile is tracing a backward pass (``joint_backward``): its gradients are
    never differentiated again (a double backward is not captured), so a formula may record one
    first-order op in place of the differentiable ops it is written in."""
    from ember.autograd.state import STATE
    tracer = STATE.tracer
    return tracer is not None and getattr(tracer, "joint_backward", False) is True


def layer_norm_grads(grad, x, normalized_shape, weight, bias, eps, needs):
    """Gradients of layer_norm for (input, weight, bias), written in ember ops (float16/
    bfloat16 computed in float32, each gradient rounded once to its input's dtype, as torch)."""
    (grad, xf, weight_f), low = _float32(grad, x, weight)
    if low is not None:
        gx, gw, gb = layer_norm_grads(grad, xf, normalized_shape, weight_f, bias, eps, needs)
        return (_round_back(gx, x._data.dtype if gx is not None else None),
                _round_back(gw, weight._data.dtype if gw is not None else None),
                _round_back(gb, bias._data.dtype if gb is not None else None))
    if weight is not None and needs[0] and _traced_backward():
        dt = x._data.dtype
        if dt.kind == "f" and grad._data.dtype == dt and weight._data.dtype == dt and \
                grad._data.shape == x._data.shape:
            # a traced backward (never differentiated again): one op, eager's one-pass kernel
            gx, gw, gb = G.layer_norm_backward(grad, x, weight, normalized_shape, eps)
            return (gx, gw if needs[1] else None,
                    gb if needs[2] and bias is not None else None)
    k = len(normalized_shape)
    axes = tuple(range(x.dim() - k, x.dim()))
    mean = G.mean(x, axes, True)
    xc = G.sub(x, mean)
    var = G.mean(G.mul(xc, xc), axes, True)
    rstd = G.rsqrt(G.add(var, eps))
    xhat = G.mul(xc, rstd)
    gx = gw = gb = None
    lead = tuple(range(x.dim() - k))
    if needs[1] and weight is not None:
        gw = G.sum(G.mul(grad, xhat), lead, False) if lead else G.mul(grad, xhat)
    if needs[2] and bias is not None:
        gb = G.sum(grad, lead, False) if lead else grad
    if needs[0]:
        gxh = G.mul(grad, weight) if weight is not None else grad
        n = 1
        for s in normalized_shape:
            n *= s
        m1 = G.mean(gxh, axes, True)
        m2 = G.mean(G.mul(gxh, xhat), axes, True)
        gx = G.mul(G.sub(G.sub(gxh, m1), G.mul(xhat, m2)), rstd)
    return gx, gw, gb


def masked_fill_value_grad(grad, mask):
    return G.sum(G.where(mask, grad, zeros((), grad._data.dtype)))


def lerp_weight_grad(grad, start, end):
    O = _ops(grad)
    return O.mul(grad, O.sub(end, start))


# ---------------------------------------------------------------- nn layers
def _grad_mode():
    from ember.autograd.state import STATE
    return STATE.grad_enabled


def conv_bias_grad(grad):
    """Gradient of a convolution bias: ``grad`` summed over every axis but channels."""
    return G.sum(grad, (0,) + tuple(range(2, grad.dim())), False)


def pool_gather(grad, indices):
    """``grad`` (N, C, H, W) read at the flat H*W ``indices`` of a max pool: the adjoint of
    max_pool2d_backward."""
    n, c = grad._data.shape[:2]
    flat = G.reshape(grad, (n, c, -1))
    idx = G.reshape(indices, (n, c, -1))
    return G.reshape(G.gather(flat, 2, idx), tuple(indices._data.shape))


def batch_norm_grads(grads, x, weight, bias, training, eps, save_mean, save_var, needs):
    """Gradients of native_batch_norm for (input, weight, bias, running_mean, running_var), in
    ember ops that recompute the training statistics from the input (so that higher derivatives
    are right; evaluation uses the saved ones)."""
    from ember.kernels import nn as nn_kernels
    grad = grads[0]
    nd = x.dim()
    c = x._data.shape[1]
    shp = nn_kernels.bn_param_shape(nd, c)
    axes = (0,) + tuple(range(2, nd))
    if training:
        mean = G.mean(x, axes, True)
        xc = G.sub(x, mean)
        rstd = G.rsqrt(G.add(G.mean(G.mul(xc, xc), axes, True), eps))
    else:
        xc = G.sub(x, G.reshape(save_mean, shp))
        rstd = G.rsqrt(G.add(G.reshape(save_var, shp), eps))
    xhat = G.mul(xc, rstd)
    gx = gw = gb = None
    if needs[1] and weight is not None:
        gw = G.sum(G.mul(grad, xhat), axes, False)
    if needs[2] and bias is not None:
        gb = G.sum(grad, axes, False)
    if needs[0]:
        gxh = G.mul(grad, G.reshape(weight, shp)) if weight is not None else grad
        if training:
            m1 = G.mean(gxh, axes, True)
            m2 = G.mean(G.mul(gxh, xhat), axes, True)
            gx = G.mul(G.sub(G.sub(gxh, m1), G.mul(xhat, m2)), rstd)
        else:
            gx = G.mul(gxh, rstd)
    return gx, gw, gb, None, None


def attention_probs(query, key, attn_mask, is_causal, scale):
    """softmax(query key^T * scale + mask) over the last dim, in spec ops: the probabilities
    of scaled_dot_product_attention where its fused kernel does not run (float16/bfloat16,
    broadcast batch dims) and for a differentiable (create_graph) backward. ``attn_mask`` is
    a bool mask (True = attend) or an additive float mask; a row masked everywhere gives zeros
    (torch's safe softmax)."""
    L, S = query.shape[-2], key.shape[-2]
    scores = G.mul(G.matmul(query, G.transpose(key, -2, -1)), scale)
    if is_causal:
        above = G.logical_not(G.tril(G.ones((L, S), np.dtype(np.bool_)), 0))  # traced L, S
        scores = G.masked_fill(scores, above, float("-inf"))
    if attn_mask is not None:
        if attn_mask._data.dtype == np.bool_:
            scores = G.masked_fill(scores, G.logical_not(attn_mask), float("-inf"))
        else:
            scores = G.add(scores, attn_mask)
    if not (is_causal or attn_mask is not None):
        return G.softmax(scores, -1, None)
    dead = G.all(G.isneginf(scores), -1, True)
    attn = G.softmax(G.masked_fill(scores, dead, 0.0), -1, None)
    return G.masked_fill(attn, dead, 0.0)


def sdpa_grads(grads, q, k, v, attn_mask, dropout_mask, is_causal, scale, output, logsumexp,
               needs):
    """Gradients of scaled_dot_product_attention_fused for (query, key, value, attn_mask), in
    ember ops recomputing the probabilities from q and k (so that higher derivatives are right;
    ``output`` and ``logsumexp`` serve the first-order kernel)."""
    grad = grads[0]
    float_mask = attn_mask is not None and attn_mask._data.dtype != np.bool_
    p = attention_probs(q, k, attn_mask, is_causal, scale)
    pd = p if dropout_mask is None else G.mul(p, dropout_mask)
    dv = G.matmul(G.transpose(pd, -2, -1), grad) if needs[2] else None
    dp = G.matmul(grad, G.transpose(v, -2, -1))
    if dropout_mask is not None:
        dp = G.mul(dp, dropout_mask)
    ds = G.mul(p, G.sub(dp, G.sum(G.mul(dp, p), (-1,), True)))
    dm = sum_to(ds, attn_mask._data.shape) if float_mask and needs[3] else None
    ds = G.mul(ds, scale)
    dq = G.matmul(ds, k) if needs[0] else None
    dk = G.matmul(G.transpose(ds, -2, -1), q) if needs[1] else None
    return dq, dk, dv, dm, None


def lstm_step_grads(grads, gx, hx, cx, w_hh, workspace, needs):
    """Gradients of lstm_step for (gx, hx, cx, w_hh), recomputing the gates."""
    dh, dc = grads[0], grads[1]
    gates = G.add(gx, G.matmul(hx, G.t(w_hh)))
    gi, gf, gg, go = G.chunk(gates, 4, -1)
    i, f, g, o = G.sigmoid(gi), G.sigmoid(gf), G.tanh(gg), G.sigmoid(go)
    tc = G.tanh(G.add(G.mul(f, cx), G.mul(i, g)))
    dct = G.add(G.mul(G.mul(dh, o), G.sub(1.0, G.mul(tc, tc))), dc)
    dgates = G.cat([G.mul(G.mul(dct, g), G.mul(i, G.sub(1.0, i))),
                    G.mul(G.mul(dct, cx), G.mul(f, G.sub(1.0, f))),
                    G.mul(G.mul(dct, i), G.sub(1.0, G.mul(g, g))),
                    G.mul(G.mul(dh, tc), G.mul(o, G.sub(1.0, o)))], -1)
    return (dgates if needs[0] else None,
            G.matmul(dgates, w_hh) if needs[1] else None,
            G.mul(dct, f) if needs[2] else None,
            G.matmul(G.t(dgates), hx) if needs[3] else None)


def gru_step_grads(grads, gx, hx, w_hh, b_hh, workspace, needs):
    """Gradients of gru_step for (gx, hx, w_hh, b_hh), recomputing the gates."""
    dh = grads[0]
    gh = G.matmul(hx, G.t(w_hh))
    if b_hh is not None:
        gh = G.add(gh, b_hh)
    xr, xz, xn = G.chunk(gx, 3, -1)
    hr, hz, hn = G.chunk(gh, 3, -1)
    r, z = G.sigmoid(G.add(xr, hr)), G.sigmoid(G.add(xz, hz))
    n = G.tanh(G.add(xn, G.mul(r, hn)))
    dn = G.mul(G.mul(dh, G.sub(1.0, z)), G.sub(1.0, G.mul(n, n)))
    dr = G.mul(G.mul(dn, hn), G.mul(r, G.sub(1.0, r)))
    dz = G.mul(G.mul(dh, G.sub(hx, n)), G.mul(z, G.sub(1.0, z)))
    dgx = G.cat([dr, dz, dn], -1)
    dgh = G.cat([dr, dz, G.mul(dn, r)], -1)
    return (dgx if needs[0] else None,
            G.add(G.mul(dh, z), G.matmul(dgh, w_hh)) if needs[1] else None,
            G.matmul(G.t(dgh), hx) if needs[2] else None,
            G.sum(dgh, (0,), False) if b_hh is not None and needs[3] else None)


def lstm_layer_grads(grads, gx, h0, c0, w_hh, reverse, output, workspace, needs):
    """Gradients of lstm_layer for (gx, h0, c0, w_hh): the steps replayed with lstm_step."""
    d_out, d_h, d_c = grads[0], grads[1], grads[2]
    T = gx._data.shape[0]
    steps = G.unbind(gx, 0)
    d_outs = G.unbind(d_out, 0)
    order = list(range(T - 1, -1, -1)) if reverse else list(range(T))
    states = {}
    h, c = h0, c0
    for t in order:
        states[t] = (h, c)
        h, c, _ = G.lstm_step(steps[t], h, c, w_hh)
    dgx = [None] * T
    dw = None
    for t in reversed(order):
        d_h = G.add(d_h, d_outs[t])
        hp, cp = states[t]
        dg, d_h, d_c, dwt = lstm_step_grads((d_h, d_c), steps[t], hp, cp, w_hh, None,
                                            (True, True, True, True))
        dgx[t] = dg
        dw = dwt if dw is None else G.add(dw, dwt)
    return (G.stack(dgx, 0) if needs[0] else None, d_h if needs[1] else None,
            d_c if needs[2] else None, dw if needs[3] else None)


# ---------------------------------------------------------------- sorting, scans
def log_softmax_grad(grad, result, dim, dtype):
    """Gradient of log_softmax: grad - exp(result) * sum(grad, dim), in the input's dtype."""
    return cast_to(G.sub(grad, G.mul(G.exp(result), G.sum(grad, (dim,), True))), dtype)


def cross_entropy_loss_grad(grad, self, lse, target, weight, reduction, ignore_index):
    """Gradient of cross_entropy_loss w.r.t. its logits: g * (softmax - onehot) per position,
    log_softmax's gradient of nll_loss's (recomputed from ``self``, so that higher derivatives
    are right; ``lse`` serves the first-order kernel)."""
    dt = self._data.dtype
    if _traced_backward() and (dt == np.float32 or dt == np.float64) and \
            grad._data.dtype == dt:
        # a traced backward (never differentiated again): one op, eager's one-pass kernel
        return G.cross_entropy_loss_backward(grad, self, lse, target, weight, reduction,
                                             ignore_index)
    d = 1 if self.dim() > 1 else 0
    logp = G.log_softmax(self, d, None)
    g = G.nll_loss_backward(grad, target, weight, tuple(self.shape), reduction, ignore_index)
    return G.sub(g, G.mul(G.exp(logp), G.sum(g, (d,), True)))



# binary_cross_entropy's higher derivatives: torch's (FunctionsManual.cpp), in ember ops.
def _bce_scaled(g, self, weight, reduction):
    """``g`` times the weight, divided by the input's size for reduction 'mean'."""
    if weight is not None:
        g = G.mul(g, weight)
    return G.div(g, self._data.size) if reduction == "mean" else g


def bce_target_grad(grad, self, weight, reduction):
    """binary_cross_entropy w.r.t. its target: -logit(x) * grad * w (infinite at x = 0, 1)."""
    return _bce_scaled(G.mul(G.neg(G.logit(self, None)), grad), self, weight, reduction)


def bce_backward_self_grad(grad, grad_output, self, target, weight, reduction):
    """binary_cross_entropy_backward w.r.t. its input:
    grad * grad_output * (x^2 - 2 x t + t) / ((x + eps)^2 (1 - x + eps)^2) * w."""
    eps = C.BCE_EPSILON
    num = G.add(G.sub(G.mul(self, self), G.mul(G.mul(self, target), 2.0)), target)
    a, b = G.add(self, eps), G.add(G.sub(1.0, self), eps)
    gi = G.mul(G.div(num, G.mul(G.mul(a, a), G.mul(b, b))), G.mul(grad, grad_output))
    return _bce_scaled(gi, self, weight, reduction)


def bce_backward_target_grad(grad, grad_output, self, target, weight, reduction):
    """binary_cross_entropy_backward w.r.t. its target:
    -grad * grad_output / max(x (1 - x), eps) * w."""
    den = G.clamp(G.mul(G.sub(1.0, self), self), C.BCE_EPSILON, None)
    return _bce_scaled(G.div(G.neg(G.mul(grad, grad_output)), den), self, weight, reduction)


def bce_backward_grad_output_grad(grad, self, target, weight, reduction):
    """binary_cross_entropy_backward w.r.t. its grad_output:
    grad * (x - t) / ((x + eps) (1 - x + eps)) * w, reduced as the loss was."""
    eps = C.BCE_EPSILON
    den = G.mul(G.add(self, eps), G.add(G.sub(1.0, self), eps))
    g = G.mul(G.div(G.sub(self, target), den), grad)
    if weight is not None:
        g = G.mul(g, weight)
    if reduction == "none":
        return g
    return G.div(G.sum(g), self._data.size) if reduction == "mean" else G.sum(g)

def cast_to(grad, dtype):
    """``grad`` in the input's dtype (reductions with ``dtype=`` compute in another one)."""
    return grad if grad._data.dtype == dtype else G.to(grad, dtype)


def _reverse_scan(scan, t, d):
    return G.flip(scan(G.flip(t, (d,)), d), (d,))


def cumprod_grad(grad, self, result, dim):
    """Gradient of cumprod along ``dim``, exact where ``self`` has zeros (as torch): before a
    slice's first zero, the right-to-left sum of grad*result over self; at the first zero, that
    sum over the products that skip it; zero after it. Written in ops (higher derivatives)."""
    x = self._data
    if x.ndim == 0:
        return grad
    d = dim % x.ndim
    if not np.any(x == 0):
        return G.div(_reverse_scan(G.cumsum, G.mul(grad, result), d), self)
    if _grad_mode():
        return _cumprod_grad_omitted(grad, self, d)
    z = x == 0
    seen = np.cumsum(z, axis=d)
    before, first = _const(seen == 0), _const(z & (seen == 1))
    safe = G.where(_const(z), 1.0, self)
    part1 = G.where(before, G.div(_reverse_scan(G.cumsum, G.mul(grad, result), d), safe), 0.0)
    skip = G.cumprod(G.where(first, 1.0, self), d)
    part2 = G.where(first, _reverse_scan(G.cumsum, G.mul(grad, skip), d), 0.0)
    return G.add(part1, part2)


def _cumprod_grad_omitted(grad, self, d):
    """cumprod's gradient with zeros, differentiable again (torch's O(n^2) form for higher
    derivatives): for each k, grad summed against the products that omit self[k]."""
    n = self._data.shape[d]
    one_shape = list(self._data.shape)
    one_shape[d] = 1
    cols = []
    for k in range(n):
        before = G.prod(G.narrow(self, d, 0, k), d, True) if k else None
        after = G.cumprod(G.narrow(self, d, k + 1, n - k - 1), d) if k < n - 1 else None
        if after is None:
            omitted = before if before is not None else _const(np.ones(one_shape, grad._data.dtype))
        elif before is None:
            omitted = G.cat([_const(np.ones(one_shape, grad._data.dtype)), after], d)
        else:
            omitted = G.cat([before, G.mul(before, after)], d)
        cols.append(G.sum(G.mul(G.narrow(grad, d, k, n - k), omitted), d, True))
    return G.cat(cols, d)


def logcumsumexp_grad(grad, self, result, dim):
    """Gradient of logcumsumexp (torch's: positive and negative parts of ``grad`` summed in the
    log domain, so nothing overflows)."""
    if self._data.ndim == 0:
        return grad
    d = dim % self._data.ndim
    g = grad._data
    low = float(np.finfo(g.dtype).min) / 4  # finite (no -inf - -inf), no overflow when shifted
    out = None
    for mask in (g > 0, g < 0):
        m = _const(mask)
        mag = G.where(m, G.abs(grad), 1.0)  # log's derivative stays finite where masked
        lg = G.where(m, G.log(mag), low)
        part = G.exp(G.add(_reverse_scan(G.logcumsumexp, G.sub(lg, result), d), self))
        out = part if out is None else G.sub(out, part)
    return out


def scan_index_grad(grad, indices, shape, dim):
    """Gradient of cummax/cummin: each output's gradient added to the input it came from."""
    if len(shape) == 0:
        return grad
    return G.scatter_add(zeros(shape, grad._data.dtype), dim % len(shape), indices, grad)


# ---------------------------------------------------------------- linalg
def _mT(x):
    return G.transpose(x, -2, -1)


def _unsq2(x):
    return G.unsqueeze(G.unsqueeze(x, -1), -1)


def linalg_det_grad(grad, A, result):
    """grad times the cofactor matrix of A: det(A) A^-T while every det is nonzero and that
    product has no NaN, else from the SVD (_det_grad_svd). Both are the adjugate whichever way
    LAPACK rounds a singular pivot: where LU leaves a tiny nonzero pivot, det and A^-T carry it
    as a factor and its reciprocal, which cancel (rank n-1: the adjugate; rank <= n-2: ~0)."""
    from ember.errors import EmberRuntimeError
    if A._data.size and not np.all(result._data):
        return _det_grad_svd(grad, A)
    try:
        out = _det_grad_inv(grad, A, result)
    except EmberRuntimeError:
        return _det_grad_svd(grad, A)
    if not np.any(np.isnan(out._data)) or not np.all(np.isfinite(A._data)):
        return out
    return _det_grad_svd(grad, A)  # A^-T overflowed: inf times a tiny det


def _det_grad_inv(grad, A, result):
    return G.mul(_unsq2(G.mul(grad, result)), _mT(G.linalg_inv(A)))


def _det_grad_svd(grad, A):
    """grad times the cofactor matrix c U diag(prod_{j != i} s_j) Vh, c = det(U) det(Vh): exact
    at singular A (zero where the rank is <= n-2)."""
    U, S, Vh = G.linalg_svd(A, False)
    n = S._data.shape[-1]
    others = G.where(Tensor._make(np.eye(n, dtype=bool)), 1.0, G.unsqueeze(S, -2))
    p = G.prod(others, -1)
    c = G.mul(G.linalg_det(U), G.linalg_det(Vh))
    return G.mul(_unsq2(G.mul(grad, c)), G.matmul(G.mul(U, G.unsqueeze(p, -2)), Vh))


def linalg_inv_grad(grad, result):
    return G.neg(G.matmul(G.matmul(_mT(result), grad), _mT(result)))


def linalg_solve_grads(grad, A, B, X, left, needs):
    """Gradients of X = A^-1 B (left) or X = B A^-1 for (A, B), B possibly a batch of vectors."""
    a_shape, b_shape = A._data.shape, B._data.shape
    vector = len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and b_shape == a_shape[:-1])
    gB = G.linalg_solve(_mT(A), grad, left=left)
    gA = None
    if needs[0]:
        if vector:
            gA = G.neg(G.mul(G.unsqueeze(gB, -1), G.unsqueeze(X, -2)))
        else:
            gA = G.neg(G.matmul(gB, _mT(X)) if left else G.matmul(_mT(X), gB))
        gA = sum_to(gA, a_shape)
    return gA, sum_to(gB, b_shape) if needs[1] else None


def linalg_solve_triangular_grads(grad, A, B, X, upper, left, unitriangular, needs):
    gB = G.linalg_solve_triangular(_mT(A), grad, upper=not upper, left=left,
                                   unitriangular=unitriangular)
    gA = None
    if needs[0]:
        gA = G.neg(G.matmul(gB, _mT(X)) if left else G.matmul(_mT(X), gB))
        k = int(unitriangular)
        gA = sum_to(G.triu(gA, k) if upper else G.tril(gA, -k), A._data.shape)
    return gA, sum_to(gB, B._data.shape) if needs[1] else None


def linalg_cholesky_grad(grad, L, upper):
    """Murray's formula (as torch): gA = L^-T Phi(L^T gL) L^-1, symmetrised."""
    if upper:
        L, grad = _mT(L), _mT(grad)
    P = G.tril(G.matmul(_mT(L), grad))
    P = G.mul(G.add(P, _mT(G.tril(P, -1))), 0.5)
    P = G.linalg_solve_triangular(_mT(L), P, upper=True, left=True)
    return G.linalg_solve_triangular(L, P, upper=False, left=False)


def _qr_grad_tall(gQ, gR, Q, R):
    # m >= n: gA = [gQ + Q copyltu(M)] R^-T with M = R gR^T - gQ^T Q
    M = G.sub(G.matmul(R, _mT(gR)), G.matmul(_mT(gQ), Q))
    M = G.add(G.tril(M), _mT(G.tril(M, -1)))
    b = G.add(gQ, G.matmul(Q, M))
    return G.linalg_solve_triangular(_mT(R), b, upper=False, left=False)


def linalg_qr_grad(grads, A, Q, R, mode):
    from ember.errors import EmberRuntimeError
    gQ, gR = grads
    m, n = A._data.shape[-2:]
    if mode == "r":
        raise EmberRuntimeError("linalg.qr: the derivative of linalg.qr depends on Q, which is not "
                                "computed when mode='r'; use mode='reduced' to differentiate")
    if mode == "complete" and m > n:
        raise EmberRuntimeError("linalg.qr: the QR decomposition is not differentiable when "
                                "mode='complete' and nrows > ncols")
    if m >= n:
        return _qr_grad_tall(gQ, gR, Q, R)
    # m < n: A = Q [R1 R2], X = A[:, :m] = Q R1, R2 = Q^T Y
    Y = G.narrow(A, -1, m, n - m)
    gR1, gR2 = G.narrow(gR, -1, 0, m), G.narrow(gR, -1, m, n - m)
    gX = _qr_grad_tall(G.add(gQ, G.matmul(Y, _mT(gR2))), gR1, Q, G.narrow(R, -1, 0, m))
    return G.cat([gX, G.matmul(Q, gR2)], -1)


def _eye_like(n, x):
    return G.eye(n, None, x._data.dtype)


def linalg_svd_grad(grads, A, U, S, Vh, full_matrices):
    """torch's svd_backward for real inputs (gauge-invariant: no check needed)."""
    gU, gS, gVh = grads
    m, n = A._data.shape[-2:]
    k = S._data.shape[-1]
    if full_matrices and m != n:
        U, gU = G.narrow(U, -1, 0, k), G.narrow(gU, -1, 0, k)
        Vh, gVh = G.narrow(Vh, -2, 0, k), G.narrow(gVh, -2, 0, k)
    V, gV = _mT(Vh), _mT(gVh)
    UhgU = G.matmul(_mT(U), gU)
    UhgU = G.sub(UhgU, _mT(UhgU))
    VhgV = G.matmul(Vh, gV)
    VhgV = G.sub(VhgV, _mT(VhgV))
    S2 = G.mul(S, S)
    E = G.add(G.sub(G.unsqueeze(S2, -2), G.unsqueeze(S2, -1)), _eye_like(k, S))
    E = G.masked_fill(E, G.eq(E, 0), 1.0)   # repeated values: finite where gU, gV vanish
    gA = G.div(G.add(G.mul(UhgU, G.unsqueeze(S, -2)), G.mul(G.unsqueeze(S, -1), VhgV)), E)
    gA = G.add(gA, G.diag_embed(gS))
    if m > n:
        gA = G.matmul(U, gA)
        gUSinv = G.div(gU, G.unsqueeze(S, -2))
        gA = G.add(gA, G.sub(gUSinv, G.matmul(U, G.matmul(_mT(U), gUSinv))))
        return G.matmul(gA, Vh)
    if m < n:
        gA = G.matmul(gA, Vh)
        gVSinv = G.div(gV, G.unsqueeze(S, -2))
        gA = G.add(gA, _mT(G.sub(gVSinv, G.matmul(V, G.matmul(Vh, gVSinv)))))
        return G.matmul(U, gA)
    return G.matmul(U, G.matmul(gA, Vh))


def linalg_eigh_grad(grads, L, V):
    """gA = V (skew(V^T gV) / E + diag(gL)) V^T, E_ij = L_j - L_i (ones on the diagonal)."""
    gL, gV = _in_dtype_of(grads[0], L), _in_dtype_of(grads[1], V)
    n = L._data.shape[-1]
    VhgV = G.matmul(_mT(V), gV)
    VhgV = G.mul(G.sub(VhgV, _mT(VhgV)), 0.5)
    E = G.add(G.sub(G.unsqueeze(L, -2), G.unsqueeze(L, -1)), _eye_like(n, L))
    E = G.masked_fill(E, G.eq(E, 0), 1.0)   # repeated eigenvalues: finite where gV vanishes
    inner = G.add(G.div(VhgV, E), G.diag_embed(gL))
    return G.matmul(V, G.matmul(inner, _mT(V)))


def linalg_cross_grads(grad, self, other, dim, needs):
    return (sum_to(G.linalg_cross(other, grad, dim=dim), self._data.shape) if needs[0] else None,
            sum_to(G.linalg_cross(grad, self, dim=dim), other._data.shape) if needs[1] else None)


def linalg_pinv_grad(grad, P, A):
    """torch's pinv_backward (valid for rank-deficient A too)."""
    m, n = A._data.shape[-2:]
    Ph, gh = _mT(P), _mT(grad)
    mm = G.matmul
    if m <= n:
        K = mm(gh, P)
        KPh = mm(K, Ph)
        out = G.add(G.sub(KPh, _mT(mm(P, K))), mm(mm(Ph, P), G.sub(gh, mm(K, A))))
        return G.sub(out, mm(mm(A, P), KPh))
    K = mm(P, gh)
    PhK = mm(Ph, K)
    out = G.add(G.sub(mm(mm(G.sub(gh, mm(A, K)), P), Ph), _mT(mm(K, P))), PhK)
    return G.sub(out, mm(mm(PhK, P), A))


def cholesky_solve_grads(grad, B, L, X, upper, needs):
    """torch's cholesky_solve_backward: gB = cholesky_solve(g, L); gL = -(C + C^T) L (lower) or
    -L (C + C^T) (upper), C = gB X^T (L's full matrix, as torch)."""
    gB = G.cholesky_solve(grad, L, upper)
    gL = None
    if needs[1]:
        C = G.matmul(gB, _mT(X))
        C = G.add(C, _mT(C))
        gL = sum_to(G.neg(G.matmul(L, C) if upper else G.matmul(C, L)), L._data.shape)
    return sum_to(gB, B._data.shape) if needs[0] else None, gL


def linalg_lu_factor_ex_grad(grads, A, LU, pivots):
    """torch's LU backward (A = P L U) for square, wide and tall A, from the packed factors."""
    from ember.kernels.linalg_decomp import lu_pivots_to_permutation
    gLU = grads[0]
    m, n = A._data.shape[-2:]
    k = min(m, n)
    dt = LU._data.dtype
    P = Tensor._make(lu_pivots_to_permutation(pivots._data, m).astype(dt))
    eye = Tensor._make(np.eye(m, k, dtype=dt))
    L = G.add(G.tril(G.narrow(LU, -1, 0, k), -1), eye)
    U = G.triu(G.narrow(LU, -2, 0, k))
    gL = G.tril(G.narrow(gLU, -1, 0, k), -1)
    gU = G.triu(G.narrow(gLU, -2, 0, k))
    mm, st = G.matmul, G.linalg_solve_triangular

    def square(L1, U1, lower_term, upper_term):
        gR = G.add(G.tril(lower_term, -1), G.triu(upper_term))
        gA = st(_mT(L1), gR, upper=True, left=True, unitriangular=True)
        return st(_mT(U1), gA, upper=False, left=False)

    if m == n:
        gA = square(L, U, mm(_mT(L), gL), mm(gU, _mT(U)))
    elif m < n:   # A = P L [U1 U2]
        U1, U2 = G.narrow(U, -1, 0, k), G.narrow(U, -1, k, n - k)
        gU1, gU2 = G.narrow(gU, -1, 0, k), G.narrow(gU, -1, k, n - k)
        gA1 = square(L, U1, G.sub(mm(_mT(L), gL), mm(gU2, _mT(U2))), mm(gU1, _mT(U1)))
        gA2 = st(_mT(L), gU2, upper=True, left=True, unitriangular=True)
        gA = G.cat([gA1, gA2], -1)
    else:         # A = P [L1; L2] U
        L1, L2 = G.narrow(L, -2, 0, k), G.narrow(L, -2, k, m - k)
        gL1, gL2 = G.narrow(gL, -2, 0, k), G.narrow(gL, -2, k, m - k)
        gA1 = square(L1, U, mm(_mT(L1), gL1), G.sub(mm(gU, _mT(U)), mm(_mT(L2), gL2)))
        gA2 = st(_mT(U), gL2, upper=False, left=False)
        gA = G.cat([gA1, gA2], -2)
    return mm(P, gA)


# ---------------------------------------------------------------- complex numbers and FFT
def _csgn(z):
    """``z / |z|``, 0 where ``z`` is 0, in ember ops (differentiable)."""
    m = G.abs(z)
    zero = G.eq(m, 0)
    return G.where(zero, zeros((), z._data.dtype), G.div(z, G.where(zero, 1.0, m)))


def abs_complex_backward(grad, self):
    """Gradient of ``abs`` at a complex ``self``: ``grad * sgn(self)`` (torch's)."""
    return G.mul(grad, _csgn(self))


def angle_backward(grad, self):
    """Gradient of ``angle``: ``grad * 1j * self / |self|**2`` (0 at 0) for a complex input,
    zeros for a real one."""
    if self._data.dtype.kind != "c":
        return zeros_for(grad, self.shape)
    m2 = G.mul(G.abs(self), G.abs(self))
    zero = G.eq(m2, 0)
    g = G.mul(G.div(G.mul(grad, self), G.where(zero, 1.0, m2)), 1j)
    return G.where(zero, zeros((), g._data.dtype), g)


def real_part(grad):
    """The real part of a (complex) gradient."""
    return G.real(grad)


def imag_part(grad):
    """The imaginary part of a complex gradient (0 for a real one)."""
    return G.imag(grad) if grad._data.dtype.kind == "c" else zeros_for(grad, grad.shape)


def imag_backward(grad):
    """Gradient of ``imag`` (a real ``grad``): ``1j * grad`` as a complex tensor."""
    return G.complex(zeros_for(grad, grad.shape), grad)


def polar_abs_grad(grad, result, abs):
    """Gradient of ``polar`` for ``abs``: ``real(conj(grad) * sgn(result))`` (torch's)."""
    return G.real(G.mul(G.conj(grad), _csgn(result)))


def polar_angle_grad(grad, result):
    """Gradient of ``polar`` for ``angle``: ``real(conj(grad) * 1j * result)`` (torch's)."""
    return G.real(G.mul(G.conj(grad), G.mul(result, 1j)))


def fft_r2c_backward(grad, dim, normalization, onesided, self_shape):
    """Gradient of ``fft_r2c``: a one-sided ``grad`` is zero-padded to the full length of the
    last transformed dim, then the real part of the inverse-direction ``fft_c2c``."""
    if onesided:
        nd = len(self_shape)
        last = dim[-1] % nd
        extra = self_shape[last] - grad._data.shape[last]
        if extra > 0:
            grad = G.pad(grad, (0, 0) * (nd - 1 - last) + (0, extra), "constant", None)
    return G.real(G.fft_c2c(grad, dim, normalization, False))


def fft_c2r_backward(grad, dim, normalization):
    """Gradient of ``fft_c2r``: the one-sided ``fft_r2c`` of ``grad`` with the bins that stand
    for two (all but the zero and Nyquist ones) doubled."""
    g = G.fft_r2c(grad, dim, normalization, True)
    nd = grad._data.ndim
    last = dim[-1] % nd
    double = grad._data.shape[last] - g._data.shape[last]
    if double > 0:
        w = np.ones(g._data.shape[last], grad._data.dtype)
        w[1:1 + double] = 2
        g = G.mul(g, _const(w.reshape((-1,) + (1,) * (nd - 1 - last))))
    return g


def as_strided_grad(grad, geometry, size, stride, storage_offset):
    """Gradient of ``self.as_strided(size, stride, storage_offset)`` for ``self`` of
    ``geometry`` (``_geometry``): ``grad`` summed into the storage positions the view reads
    (overlapping ones accumulate), read back at the positions ``self`` covers (divided among an
    overlapping input's aliases), as torch's."""
    from ember.kernels import strided
    shape, strides, own = geometry
    in_idx = strided.flat_indices(shape, strides, own).ravel()
    out_idx = strided.flat_indices(tuple(int(s) for s in size), tuple(int(s) for s in stride),
                                   own if storage_offset is None else int(storage_offset)).ravel()
    pos = np.unique(np.concatenate([in_idx, out_idx]))
    o = Tensor._make(np.searchsorted(pos, out_idx).astype(np.int64))
    i = np.searchsorted(pos, in_idx).astype(np.int64)
    acc = G.index_add(G.zeros((len(pos),), grad._data.dtype), 0, o, G.reshape(grad, (-1,)))
    g = G.index_select(acc, 0, Tensor._make(i))
    counts = np.bincount(i, minlength=len(pos))[i]
    if counts.max(initial=1) > 1:
        g = G.div(g, Tensor._make(counts.astype(grad._data.dtype)))
    return G.reshape(g, shape)


def linalg_eig_grad(grads, A, L, V):
    """torch's linalg_eig_backward: with gV' = V^H gV - V^H V re(diag(V^H gV)) (the part a
    phase-invariant loss sees), gA = V^-H (gV' / conj(L_j - L_i) + diag(gL)) V^H; the real part
    for a real ``A``. Defined where the eigenvalues are distinct."""
    gL, gV = _in_dtype_of(grads[0], L), _in_dtype_of(grads[1], V)
    n = L._data.shape[-1]
    Vh = G.conj(_mT(V))
    inner = None
    if gV is not None:
        VhgV = G.matmul(Vh, gV)
        re_diag = G.real(G.diagonal(VhgV, 0, -2, -1))
        inner = G.sub(VhgV, G.matmul(Vh, G.mul(V, G.unsqueeze(re_diag, -2))))
        Lc = G.conj(L)
        E = G.add(G.sub(G.unsqueeze(Lc, -2), G.unsqueeze(Lc, -1)), _eye_like(n, L))
        inner = G.div(inner, E)
    if gL is not None:
        d = G.diag_embed(gL)
        inner = d if inner is None else G.add(inner, d)
    if inner is None:
        return None
    gA = G.linalg_solve(Vh, G.matmul(inner, Vh))
    return gA if A._data.dtype.kind == "c" else G.real(gA)
