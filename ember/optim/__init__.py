"""``ember.optim``: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and ``lr_scheduler``."""
from ember.optim import lr_scheduler  # noqa: F401
from ember.optim.algorithms import SGD, Adagrad, Adam, AdamW, RMSprop
from ember.optim.optimizer import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]


def _check_constructors():
    """Optimizers' constructors raise ember's errors named by the class (ember.errors.public);
    ``step`` is left alone (it runs the user's closure)."""
    from ember.errors import public
    for cls in (Optimizer, SGD, Adam, AdamW, RMSprop, Adagrad):
        if "__init__" in vars(cls):
            cls.__init__ = public(vars(cls)["__init__"], "class")


_check_constructors()
