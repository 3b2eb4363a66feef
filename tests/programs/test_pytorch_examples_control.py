"""The control: the pytorch/examples programs of test_pytorch_examples.py, with the same data
and checks, on torch (slow-marked)."""
import pytest

from tests.programs.test_pytorch_examples import PROGRAMS, run_program


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_on_torch(name, tmp_path):
    pytest.importorskip("torch")
    run_program(name, "torch", tmp_path)
