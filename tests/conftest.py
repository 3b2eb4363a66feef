"""Suite-wide hooks: the op_db coverage report (tests/op_db/report.py) at the end of a run."""
from tests.op_db.report import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401
