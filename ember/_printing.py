"""``set_printoptions`` / ``get_printoptions``: how tensors print (torch's options and profiles).
The options live in ``ember._tensor_str.PRINT_OPTIONS``, which the tensor repr reads."""
from ember._tensor_str import PRINT_OPTIONS
from ember.errors import EmberValueError

__all__ = ["set_printoptions", "get_printoptions"]

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=float("inf"), edgeitems=3, linewidth=80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print, as torch: ``precision`` (digits after the point), ``threshold``
    (elements before eliding with ``...``), ``edgeitems`` (shown at each end when eliding),
    ``linewidth``, ``profile`` ('default', 'short', 'full' set all four first) and ``sci_mode``
    (True / False forces scientific / fixed notation; None chooses)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise EmberValueError(f"set_printoptions: profile must be one of "
                                  f"{sorted(_PROFILES)}, got {profile!r}")
        PRINT_OPTIONS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise EmberValueError(f"set_printoptions: {name} must be a non-negative "
                                      f"number, got {value!r}")
            PRINT_OPTIONS[name] = value
    PRINT_OPTIONS["sci_mode"] = sci_mode


def get_printoptions():
    """The current print options as a dict (torch._tensor_str.get_printoptions; torch has no
    top-level getter)."""
    return dict(PRINT_OPTIONS)
