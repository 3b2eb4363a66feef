"""Control for test_pytorch_cifar_programs.py: pytorch-cifar's main.py and its checks on real
torch (slow; a file of its own, so that ``--dist loadfile`` gives it another worker). The model
comparison runs torch already."""
import pytest

from tests.programs.test_pytorch_cifar_programs import main_first_epoch

pytest.importorskip("torch")


@pytest.mark.slow
def test_main_trains_simple_dla_for_an_epoch_on_torch(tmp_path):
    main_first_epoch("torch", tmp_path)
