"""torch.nn.modules.padding: the padding layers (constant, zero, reflection, replication,
circular; 1-d to 3-d)."""
from ember.nn import functional as F
from ember.nn.modules.module import Module


class _PadNd(Module):
    _mode = "constant"
    _n = 2
    _has_value = True   # takes (and prints) a fill value: ConstantPad, not ZeroPad

    def __init__(self, padding, value=None):
        super().__init__()
        self.padding = (padding,) * (2 * self._n) if isinstance(padding, int) else tuple(padding)
        if self._mode == "constant":
            self.value = 0.0 if value is None else value

    def forward(self, input):
        return F.pad(input, self.padding, self._mode,
                     self.value if self._mode == "constant" else None)

    def extra_repr(self):   # as torch: ConstantPad names both, the others the padding only
        if self._has_value:
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name, mode, n, has_value):
    if has_value:
        def __init__(self, padding, value):
            _PadNd.__init__(self, padding, value)
    else:
        def __init__(self, padding):
            _PadNd.__init__(self, padding)
    return type(name, (_PadNd,), {"_mode": mode, "_n": n, "_has_value": has_value,
                                  "__init__": __init__, "__module__": __name__})


ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1, True)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2, True)
ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, False)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, False)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1, False)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2, False)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1, False)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2, False)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1, False)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2, False)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3, True)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, False)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3, False)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3, False)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3, False)
