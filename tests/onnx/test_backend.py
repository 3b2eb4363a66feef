"""ONNX's own backend node tests (generated from the installed onnx package) through
``ember.onnx.backend``.

Every case is loaded with ``prepare`` (the importer's load-time checks: op, opset, attributes,
dtypes); a case the importer accepts must produce the expected outputs (values within the case's
rtol/atol, same dtype and shape), except the few listed in KNOWN_FAILURES with the reason.
Every case the importer refuses must match a pattern of backend_excluded.yaml, which says why.
The pass rate over all cases, and the refused cases by reason, are printed (run with -s)."""
import collections
import fnmatch
import os
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from ember.onnx import backend  # noqa: E402
# one runner and comparison for this test and `ember onnx check-backend`: (status, message), a
# refused case's message "op: reason" (its first problem)
from ember.onnx.backend_check import run_case as _run_case  # noqa: E402
from ember.onnx.importer import registered_importers  # noqa: E402
from onnx import helper  # noqa: E402

import ember  # noqa: E402
from tests.onnx.models import tiny_model, vi  # noqa: E402

# case name -> why ember's result differs (each must really fail; checked below)
_RANDOM = "training-mode dropout is random: the expected mask comes from NumPy's generator"
KNOWN_FAILURES = {
    "test_training_dropout": _RANDOM,
    "test_training_dropout_default": _RANDOM,
    "test_training_dropout_default_mask": _RANDOM,
    "test_training_dropout_mask": _RANDOM,
    **{f"test_bernoulli{v}": "Bernoulli samples ember's generator; the expected values come from "
                             "NumPy's global one" for v in ("", "_double", "_seed", "_expanded",
                                                            "_double_expanded",
                                                            "_seed_expanded")},
    # imaginary parts that are 0 up to 1e-15 (a float64 FFT of the same input agrees) where the
    # expected output holds the reference's complex64 round-off, 1.9e-7, above the atol of 1e-7
    "test_dft_inverse": "complex64 round-off of the reference above the case's atol",
    "test_dft_inverse_opset19": "complex64 round-off of the reference above the case's atol",
}


def _excluded():
    """[(pattern, op, why)] from backend_excluded.yaml."""
    import yaml
    path = os.path.join(os.path.dirname(__file__), "backend_excluded.yaml")
    with open(path, encoding="utf-8") as f:
        entries = yaml.safe_load(f) or []
    return [(e["pattern"], e.get("op"), e["why"]) for e in entries]


def _ops_registered(model):
    reg = {op for (_dom, op) in registered_importers()}
    return all(n.op_type in reg for n in model.graph.node)


def _results():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
        out = {}
        with np.errstate(all="ignore"):
            for c in cases:
                status, msg = _run_case(c)
                out[c.name] = (status, msg, _ops_registered(c.model))
    return out


def test_node_tests_pass_where_the_importer_accepts_the_model(record_property):
    """One test (case generation takes seconds: done once, also under xdist); the pass rate is
    printed at the end of the run (tests/op_db/report.py)."""
    results = _results()
    total = len(results)
    passed = sum(s == "pass" for s, _, _ in results.values())
    accepted = sum(s != "unsupported" for s, _, _ in results.values())
    op_cases = [k for k, (_, _, r) in results.items() if r]
    op_passed = sum(results[k][0] == "pass" for k in op_cases)
    figure = (f"ONNX backend node tests (onnx {onnx.__version__}): {passed}/{total} passed "
              f"({100 * passed / total:.1f}%); {passed}/{accepted} of the cases the importer "
              f"accepts; {op_passed}/{len(op_cases)} of the cases whose ops are all registered")
    print("\n" + figure)
    record_property("figure", figure)
    refused = {k: m for k, (s, m, _) in results.items() if s == "unsupported"}
    by_reason = collections.Counter(refused.values())
    for why, n in by_reason.most_common():
        print(f"  refused {n:3d}: {why}")
    failures = {k: m for k, (s, m, _) in results.items()
                if s == "fail" and k not in KNOWN_FAILURES}
    assert not failures, "\n".join(f"{k}: {m}" for k, m in sorted(failures.items()))
    stale = [k for k in KNOWN_FAILURES if results.get(k, ("pass",))[0] != "fail"]
    assert not stale, f"KNOWN_FAILURES entries that no longer fail (remove them): {stale}"
    _check_excluded(refused)
    _check_core_ops(results)


def _check_excluded(refused):
    """Every refused case is explained by a pattern of backend_excluded.yaml (whose op, where
    given, is the op refused), and every pattern still matches a refused case."""
    excluded = _excluded()
    unexplained = []
    used = set()
    for name, why in sorted(refused.items()):
        hit = [p for p, op, _ in excluded if fnmatch.fnmatchcase(name, p) and
               (op is None or (why or "").startswith(f"{op}:"))]
        if not hit:
            unexplained.append(f"{name}: {why}")
        used.update(hit)
    assert not unexplained, ("refused cases that backend_excluded.yaml does not explain (add a "
                             "pattern with the reason, or support them):\n" +
                             "\n".join(unexplained))
    stale = [p for p, _, _ in excluded if p not in used]
    assert not stale, f"backend_excluded.yaml patterns that match no refused case: {stale}"


def _check_core_ops(results):
    """The ops ember's exporter emits have passing node tests."""
    for name in ("test_conv_with_strides_padding", "test_gemm_default_no_bias", "test_relu",
                 "test_maxpool_2d_pads", "test_averagepool_2d_pads", "test_globalaveragepool",
                 "test_batchnorm_epsilon", "test_reshape_negative_dim", "test_flatten_axis1",
                 "test_transpose_default", "test_concat_2d_axis_0", "test_squeeze",
                 "test_unsqueeze_axis_0", "test_gather_0", "test_shape", "test_slice_neg_steps",
                 "test_expand_dim_changed", "test_reduce_mean_default_axes_keepdims_example",
                 "test_softmax_axis_1", "test_layer_normalization_2d_axis0", "test_einsum_sum",
                 "test_split_equal_parts_1d_opset18", "test_constant_pad", "test_edge_pad",
                 "test_reflect_pad", "test_top_k", "test_range_float_type_positive_delta",
                 "test_gelu_default_1", "test_cast_FLOAT_to_DOUBLE", "test_where_example",
                 "test_lstm_defaults", "test_gru_defaults", "test_simple_rnn_defaults", "test_if",
                 "test_loop11", "test_scan9_sum", "test_resize_upsample_sizes_nearest"):
        assert results[name][0] == "pass", (name, results[name])


def test_a_refusal_without_a_listed_reason_fails():
    """The exclusion check itself: an unexplained refusal, and a stale pattern, are errors."""
    with pytest.raises(AssertionError, match="does not explain"):
        _check_excluded({"test_image_decoder_x": "ImageDecoder: no importer for this op",
                         "test_new_op": "NewOp: no importer for this op"})
    with pytest.raises(AssertionError, match="match no refused case"):
        _check_excluded({})
    _check_excluded({"test_image_decoder_x": "ImageDecoder: no importer for this op"})


def test_supports_device():
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def test_backend_run_node_and_run_model():
    x = np.array([[-1.0, 2.0]], np.float32)
    (y,) = backend.run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(y, [[0.0, 2.0]])
    m = tiny_model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", [1, 2])], [vi("y", [1, 2])])
    np.testing.assert_array_equal(backend.run_model(m, {"x": x})[0], -x)
    with pytest.raises(ember.UnsupportedError, match="CUDA"):
        backend.prepare(m, "CUDA")
