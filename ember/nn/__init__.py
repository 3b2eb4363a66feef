"""``ember.nn``: modules, parameters, ``functional``, ``init`` and ``utils``, following torch.nn.

Layers take torch's constructor arguments and defaults, register torch's parameter names (so
state dicts move between the two by key) and use torch's default initialisation.
"""
from ember.nn import functional, init, utils  # noqa: F401
from ember.nn.modules import *  # noqa: F401,F403
from ember.nn.modules import Module
from ember.nn.parameter import Buffer, Parameter, UninitializedParameter  # noqa: F401
