"""jit.save / jit.load: one safetensors file (IR text + weights), no pickle, loadable in a
fresh process that has only ember (not the model's code)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.jit as jit
from tests.jit.models import LSTMLM, ResNetish, TransformerLayer, example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json, sys
import numpy as np
import ember, ember.jit
assert "tests" not in sys.modules and not any(m.startswith("tests.") for m in sys.modules)
m = ember.jit.load(sys.argv[1])
x = ember.tensor(np.load(sys.argv[2]))
with ember.no_grad():
    out = m(x)
outs = out if isinstance(out, tuple) else (out,)
np.save(sys.argv[3], outs[0].numpy())
print(json.dumps({"kinds": sorted({n.kind for n in m.graph.nodes})}))
"""


@pytest.mark.parametrize("cls,opt", [(ResNetish, True), (TransformerLayer, False),
                                     (LSTMLM, False)])
def test_save_load_fresh_subprocess(tmp_path, cls, opt):
    model = cls().eval()
    traced = jit.trace(model, (example(model),), optimize=opt)
    path = tmp_path / "model.ejit"
    jit.save(traced, path)
    with open(path, "rb") as fh:
        assert b"pickle" not in fh.read(4096).lower()
    x = example(model, 2, seed=9)
    np.save(tmp_path / "x.npy", x.numpy())
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(tmp_path / "x.npy"),
                          str(tmp_path / "y.npy")], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout.strip().splitlines()[-1])
    with ember.no_grad():
        ref = model(x)
    ref = ref[0] if isinstance(ref, tuple) else ref
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), ref.numpy(), rtol=1e-4, atol=1e-5)


def test_loaded_params_are_trainable(tmp_path):
    w = ember.randn(3, requires_grad=True)
    traced = jit.trace(lambda x: (x * w).sum(), (ember.randn(3),))
    jit.save(traced, tmp_path / "f.ejit")
    loaded = jit.load(tmp_path / "f.ejit")
    assert loaded.state_names == ["param0"]
    x = ember.randn(3)
    loaded(x).backward()
    np.testing.assert_allclose(loaded.state_tensors()[0].grad._data, x._data)


def test_not_a_jit_file(tmp_path):
    from safetensors.numpy import save_file
    save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(ValueError, match="not an ember.jit file"):
        jit.load(tmp_path / "w.safetensors")
