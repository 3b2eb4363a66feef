"""A stand-in for the few torchvision pieces that pytorch/examples programs use, written
against ``torch`` so that it runs unchanged on torch and, through the import alias, on ember
(tests/programs/run_program.py). It never downloads: data sets are read from files the tests
generate in torchvision's formats. Semantics follow torchvision's."""
from . import datasets, models, transforms, utils  # noqa: F401

__version__ = "0.0-standin"
