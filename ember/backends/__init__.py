"""Process-wide backend settings (``ember.backends.conv``) and torch's backend flags a CPU-only
framework still answers (``cudnn``, ``cuda``, ``mps``, ``mkldnn``, ``openmp``)
and ``mha``, the transformer fast-path switch."""
from . import conv, cuda, cudnn, mha, mps  # noqa: F401


class _Mkldnn:
    """``backends.mkldnn``: ember does not use oneDNN."""
    enabled = False

    @staticmethod
    def is_available():
        return False


class _Openmp:
    """``backends.openmp``: ember's threads are numba's, not OpenMP's."""

    @staticmethod
    def is_available():
        return False


mkldnn = _Mkldnn()
openmp = _Openmp()
