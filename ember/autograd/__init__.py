"""Automatic differentiation: the engine, grad modes, custom Functions and gradient checks."""
from ember.autograd.engine import backward, grad
from ember.autograd.function import Function, FunctionCtx
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck
from ember.autograd.grad_mode import (detect_anomaly, enable_grad, inference_mode,
                                      is_grad_enabled, no_grad, set_grad_enabled)
from ember.autograd.node import Node
from ember.autograd.variable import Variable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "gradcheck", "gradgradcheck",
           "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "detect_anomaly", "is_grad_enabled", "Node", "Variable"]


def __getattr__(name):
    """PEP 562: ``ember.autograd.functional`` (jacobian, hessian, vjp, ...),
    ``ember.autograd.profiler`` and ``ember.autograd.graph`` (saved-tensor hooks) load on first
    access, as their imports do."""
    if name in ("functional", "profiler", "graph"):
        import importlib
        return importlib.import_module(f"ember.autograd.{name}")
    raise AttributeError(f"module 'ember.autograd' has no attribute {name!r}")
