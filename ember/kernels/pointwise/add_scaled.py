"""``x += b * alpha`` in place, in one pass of the pointwise engine: the update
``p.data.add_(p.grad, alpha=-lr)`` of PyTorch's examples, run by ``Tensor.add_`` / ``sub_``
without autograd (``ember.autograd.dispatch``). Eager ``add`` scales ``b`` into a temporary and
adds it into another, which a plain in-place call then copies back: (512, 784) float32, 435 us
against 56 us here (two threads) once compiled; tiered like every engine kernel
(``EMBER_JIT_COMPILE``), so NumPy evaluates the same expression meanwhile."""
MIN_SIZE = 1 << 16     # elements from which the engine beats NumPy's temporaries

def update(x, b, alpha):
    """``x + b * alpha`` as eager ``add`` computes it (b scaled first, then added)."""
    return x + b * alpha


def usable(x, b):
    """Whether ``add_scaled_`` applies: float x of MIN_SIZE elements or more, b an array of x's
    dtype and no more dimensions (the caller has checked that b broadcasts to x's shape), Numba
    installed (not imported here)."""
    from ember.kernels.runtime import compiler
    return (x.size >= MIN_SIZE and x.dtype.kind == "f" and x.dtype.itemsize >= 4
            and b.dtype == x.dtype and b.ndim <= x.ndim and compiler.available())


def add_scaled_(x, b, alpha):
    """In place: x = x + b * alpha (b broadcast to x's shape), one pass over x."""
    from ember.kernels.pointwise import compile_form
    compile_form(update, ("x", "b", "alpha"), (x, b, float))(x, b, float(alpha), out=(x,))
