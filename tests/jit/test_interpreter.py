"""Def-use freeing: the interpreter's peak memory with frees at last use is clearly lower than
keeping every intermediate (tracemalloc, ResNet-style net); the generated code frees too."""
import gc
import tracemalloc

import ember
import ember.jit as jit
from tests.jit.models import ResNetish, example


def peak(fn):
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    with ember.no_grad():
        out = fn()
    _, p = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del out
    return p


def test_def_use_frees_lower_peak():
    model = ResNetish(width=16).eval()
    x = example(model, 8, seed=2)
    t = jit.trace(model, (x,))
    keep = peak(lambda: t.run_interpreter(x, free=False, mode="array"))
    free = peak(lambda: t.run_interpreter(x, free=True, mode="array"))
    code = peak(lambda: t(x))
    assert free < 0.5 * keep, (free, keep)
    assert code < 0.5 * keep, (code, keep)
    # with frees the interpreter never holds more than a handful of values at once
    from ember.jit.interpreter import Interpreter
    it = Interpreter(t.graph, "array")
    it.run(x._data, *[s._data for s in t.state_tensors()])
    live_free = it.peak_live
    it.run(x._data, *[s._data for s in t.state_tensors()], free=False)
    assert live_free < it.peak_live / 2
