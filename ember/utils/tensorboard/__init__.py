"""``torch.utils.tensorboard``: ``SummaryWriter`` writes TensorBoard event files through the
``tensorboard`` package's own event writer and protos (the ``tensorboard`` extra:
``pip install 'ember[tensorboard]'``; a MissingDependencyError without it). ``import ember``
never imports tensorboard."""
from ember.utils.tensorboard.writer import FileWriter, SummaryWriter

__all__ = ["FileWriter", "SummaryWriter"]
