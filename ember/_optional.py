"""Optional dependencies: one place that imports them and says what to install when one is
missing. ember's core needs NumPy and safetensors; everything else is an extra
(pyproject.toml): ``onnx`` (onnx, onnxruntime), ``fast`` (numba, scipy, threadpoolctl),
``io`` (tqdm), ``distributed`` (mpi4py, mpich), ``tensorboard`` (tensorboard).

    onnx = require("onnx", feature="ONNX export", extra="onnx")

A leaf module (imports only ``errors``), usable from every layer.
"""
import importlib

from ember.errors import MissingDependencyError

__all__ = ["require", "message"]


def message(package, feature, extra=None):
    """The sentence ember says when ``feature`` needs ``package`` and it is not installed:
    the feature, the package, and the pip command (``ember[extra]``, or the package itself
    when it is a core dependency and ``extra`` is None)."""
    hint = f"pip install 'ember[{extra}]'" if extra else f"pip install {package}"
    return f"{feature} needs {package}, which is not installed: {hint}"


def require(module, feature, extra=None):
    """Import and return ``module`` (``"onnx"``, ``"scipy.linalg"``, ``"mpi4py.MPI"``).

    Raises MissingDependencyError naming ``feature`` and the extra to install when the module's
    package is not installed (or fails to import)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        package = module.split(".")[0]
        raise MissingDependencyError(message(package, feature, extra), name=package) from e
