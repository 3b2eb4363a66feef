"""``ember.optim``: torch's optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax,
NAdam, RAdam, ASGD, Rprop, LBFGS) and ``lr_scheduler``. SparseAdam is not provided (ember has
no sparse gradients; docs/unsupported.md)."""
from ember.optim import lr_scheduler  # noqa: F401
from ember.optim.algorithms import (SGD, ASGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam,
                                    RAdam, RMSprop, Rprop)
from ember.optim.lbfgs import LBFGS
from ember.optim.optimizer import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "ASGD", "Rprop", "LBFGS", "lr_scheduler"]


def _check_constructors():
    """Optimizers' constructors raise ember's errors named by the class (ember.errors.public);
    ``step`` is left alone (it runs the user's closure)."""
    from ember.errors import public
    for cls in (Optimizer, SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam,
                ASGD, Rprop, LBFGS):
        if "__init__" in vars(cls):
            cls.__init__ = public(vars(cls)["__init__"], "class")


_check_constructors()
