"""``ember.optim``: torch's optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax,
NAdam, RAdam, ASGD, Rprop, LBFGS, SparseAdam), ``lr_scheduler`` and ``swa_utils`` (loaded on
first use: it needs ember.nn). SparseAdam updates the rows of ember's dense gradients that hold
a nonzero value (ember has no sparse gradients; docs/optim.md)."""
from ember.optim import lr_scheduler  # noqa: F401
from ember.optim.algorithms import (SGD, ASGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam,
                                    RAdam, RMSprop, Rprop)
from ember.optim.lbfgs import LBFGS
from ember.optim.optimizer import Optimizer
from ember.optim.sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "ASGD", "Rprop", "LBFGS", "SparseAdam", "lr_scheduler", "swa_utils"]


def __getattr__(name):
    """PEP 562: ``ember.optim.swa_utils`` loads on first access (``import ember.optim`` does
    not load ember.nn)."""
    if name == "swa_utils":
        import importlib
        return importlib.import_module("ember.optim.swa_utils")
    raise AttributeError(f"module 'ember.optim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"swa_utils"})


def _check_constructors():
    """Optimizers' constructors raise ember's errors named by the class (ember.errors.public);
    ``step`` is left alone (it runs the user's closure)."""
    from ember.errors import public
    for cls in (Optimizer, SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam,
                ASGD, Rprop, LBFGS, SparseAdam):
        if "__init__" in vars(cls):
            cls.__init__ = public(vars(cls)["__init__"], "class")


_check_constructors()
