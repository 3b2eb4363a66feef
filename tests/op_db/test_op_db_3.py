"""op_db parity, shard 3 of 4 (see tests/op_db/suite.py and docs/op_db.md)."""
import pytest

torch = pytest.importorskip("torch")

from tests.op_db.suite import make_tests  # noqa: E402

test_op_db_entry, test_op_db_shard_coverage = make_tests(3, torch)
