"""The README's Python examples run as written."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _blocks():
    with open(os.path.join(ROOT, "README.md")) as fh:
        return re.findall(r"```python\n(.*?)```", fh.read(), re.S)


@pytest.mark.parametrize("i", range(len(_blocks())))
def test_readme_example_runs(i, tmp_path, monkeypatch):
    code = _blocks()[i]
    if "ember.onnx" in code:
        pytest.importorskip("onnx")
        pytest.importorskip("onnxruntime")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md block {i}", "exec"), {"__name__": "__readme__"})
