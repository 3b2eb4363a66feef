"""``import torch`` gives ember: a meta-path finder that maps ``torch[.x.y]`` to ``ember[.x.y]``
(the very module object, under both names)."""
import importlib
import importlib.abc
import importlib.util
import sys


class TorchToEmber(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        if importlib.util.find_spec("ember" + fullname[len("torch"):]) is None:
            return None                      # ModuleNotFoundError names the torch module
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("ember" + spec.name[len("torch"):])

    def exec_module(self, module):
        pass                                 # create_module returned an imported module


def install():
    if not any(isinstance(f, TorchToEmber) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchToEmber())
