"""Suite-wide hooks: the op_db coverage report (tests/op_db/report.py) at the end of a run."""
from tests.op_db.report import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401

# Kernels compile on first use, blocking, so every test runs the compiled paths it asks for and
# results do not depend on when a background compile finishes (tests/kernels/test_first_call.py
# sets other modes explicitly).
import os  # noqa: E402
os.environ.setdefault("EMBER_JIT_COMPILE", "sync")
