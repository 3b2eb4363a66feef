"""The model cases shipped in the installed onnx wheel (onnx/backend/test/data: simple,
pytorch-converted, pytorch-operator; real, whose models are the weight-free ``light`` copies run
on ONNX's dummy inputs) through ``ember.onnx.backend``: every case the importer accepts passes.
The pass rate is printed (run with -s)."""
import pytest

onnx = pytest.importorskip("onnx")

from ember.onnx import backend_check as bc  # noqa: E402

# what ember refuses at load, by reason (each must still be refused; checked below)
REFUSED = {
    "op Gradient: no importer for this op in domain 'ai.onnx.preview.training'":
        "the Gradient training op (symbolic differentiation of a graph) is not imported",
}


def _check(kinds):
    cases = bc.model_cases(kinds)
    assert cases, f"no model cases found under {bc.data_dir()} for {kinds}"
    results = bc.run_cases(cases)
    print(f"\nONNX model cases {'/'.join(kinds)}: {bc.summary(results)}")
    failures = {k: r.message for k, r in results.items() if r.status == "fail"}
    assert not failures, "\n".join(f"{k}: {m}" for k, m in sorted(failures.items()))
    refused = {k: r.reason for k, r in results.items() if r.status == "unsupported"}
    unexpected = {k: v for k, v in refused.items() if v not in REFUSED}
    assert not unexpected, unexpected
    return results


def test_shipped_small_model_cases():
    results = _check(("simple", "pytorch-converted", "pytorch-operator"))
    assert len(results) >= 100
    # torch-exported PReLU(C) at opset 6: the slope is per channel (axis 1)
    for n in ("1d", "2d", "3d"):
        assert results[f"pytorch-converted/test_PReLU_{n}_multiparam"].status == "pass"
    stale = set(REFUSED) - {r.reason for r in results.values() if r.status == "unsupported"}
    assert not stale, f"REFUSED entries no longer refused (remove them): {stale}"


@pytest.mark.slow
def test_shipped_real_models():
    """AlexNet, DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet, VGG-19,
    ZFNet-512 at 224x224 (constant weights), about 12 s on two cores."""
    results = _check(("real",))
    assert len(results) == 9 and all(r.status == "pass" for r in results.values())
