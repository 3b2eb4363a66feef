"""``ember.fft``: torch.fft's discrete Fourier transforms (``fft``, ``rfft``, ``fftn``, ...,
``fftshift``, ``fftfreq``), with torch's names, arguments, dtypes and gradients. They are written
in ``ember/ops/fft.py``, in the spectral family's spec ops."""
from ember.ops import fft as _fft

__all__ = list(_fft.__all__)
globals().update({_name: getattr(_fft, _name) for _name in __all__})
