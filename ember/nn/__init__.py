"""``ember.nn``: modules, parameters, ``functional``, ``init`` and ``utils``, following torch.nn.

Layers take torch's constructor arguments and defaults, register torch's parameter names (so
state dicts move between the two by key) and use torch's default initialisation.
"""
from ember.nn import functional, init, utils  # noqa: F401
from ember.nn.modules import *  # noqa: F401,F403
from ember.nn.modules import Module
from ember.nn.parameter import (Buffer, Parameter, UninitializedBuffer,  # noqa: F401
                                UninitializedParameter)


def __getattr__(name):
    """``parallel``, ``SyncBatchNorm`` load on first use (they need ember.distributed), as does
    ``attention``."""
    import importlib
    if name in ("parallel", "attention"):
        return importlib.import_module(f"ember.nn.{name}")
    if name == "DataParallel":
        return importlib.import_module("ember.nn.parallel").DataParallel
    if name == "SyncBatchNorm":
        return importlib.import_module("ember.nn.parallel.sync_batchnorm").SyncBatchNorm
    raise AttributeError(f"module 'ember.nn' has no attribute {name!r}")
