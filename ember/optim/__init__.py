"""``ember.optim``: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) and ``lr_scheduler``."""
from ember.optim import lr_scheduler  # noqa: F401
from ember.optim.algorithms import SGD, Adagrad, Adam, AdamW, RMSprop
from ember.optim.optimizer import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
