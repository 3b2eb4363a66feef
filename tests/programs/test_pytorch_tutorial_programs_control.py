"""Control for test_pytorch_tutorial_programs.py: the same yunjey/pytorch-tutorial programs and
checks on real torch (slow; a file of its own, so that ``--dist loadfile`` gives it another
worker). A check that fails here is wrong about the program, not about ember."""
import pytest

from tests.programs.test_pytorch_tutorial_programs import PROGRAMS

pytest.importorskip("torch")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_on_torch(name, tmp_path):
    PROGRAMS[name]("torch", tmp_path)
