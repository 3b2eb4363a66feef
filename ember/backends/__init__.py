"""Process-wide backend settings (``ember.backends.conv``)."""
from . import conv  # noqa: F401
