"""Suite-wide hooks: the op_db coverage report (tests/op_db/report.py) at the end of a run."""
from tests.op_db.report import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401

# Kernels compile on first use, blocking, so every test runs the compiled paths it asks for and
# results do not depend on when a background compile finishes
# (tests/kernels/runtime/test_compiler.py sets other modes explicitly).
import os  # noqa: E402
os.environ.setdefault("EMBER_JIT_COMPILE", "sync")

# Hypothesis (>= 6.131) mixes literal constants from every non-installed module in sys.modules
# into its draws, so a derandomized test drew different examples depending on which test files
# and lazily imported ember modules came before it in the worker. The suite draws from
# Hypothesis's built-in constants only: the same examples in any order, on any machine.
from hypothesis.internal.conjecture import providers as _hypothesis_providers  # noqa: E402

_hypothesis_providers._get_local_constants = lambda: _hypothesis_providers.Constants()
