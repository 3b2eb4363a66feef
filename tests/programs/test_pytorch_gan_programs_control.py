"""The control: the PyTorch-GAN programs of test_pytorch_gan_programs.py, with the same data,
flags and checks, on torch (slow-marked); the four that stop with an error stop the same way
on torch."""
import pytest

from tests.programs.test_pytorch_gan_programs import (FAILING, PROGRAMS, run_failing_program,
                                                      run_program)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_on_torch(name, tmp_path):
    pytest.importorskip("torch")
    run_program(name, "torch", tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAILING))
def test_program_fails_on_torch(name, tmp_path):
    pytest.importorskip("torch")
    run_failing_program(name, "torch", tmp_path)
