"""The parametrized op_db tests, built once per shard file (test_op_db_<k>.py) so that
``pytest -n 2 --dist loadfile`` spreads them over workers."""
import warnings

import numpy as np
import pytest

from tests.op_db import resolve as R

SHARDS = 4


def _entries(shard):
    return [op for i, op in enumerate(R.op_db()) if i % SHARDS == shard]


def make_tests(shard, torch):
    """(test of each resolved entry, test recording this shard's excluded/unresolved entries)."""
    entries = _entries(shard)
    known = R.known_failures()
    params, others = [], []
    for op in entries:
        eid = R.entry_id(op)
        status, info = R.classify(op)
        if status == "resolved":
            marks = [pytest.mark.xfail(strict=True, reason=known[eid])] if eid in known else []
            params.append(pytest.param(op, info, id=eid, marks=marks))
        else:
            others.append((eid, status, info or ""))

    @pytest.mark.parametrize("op,resolved", params)
    def test_op_db_entry(op, resolved, record_property):
        """ember's equivalent of this OpInfo matches torch on every sample input."""
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = R.run_entry(op, resolved, torch)
        eid = R.entry_id(op)
        detail = result.failures[0] if result.failures else \
            f"{result.ran} samples, {result.grads} with gradients"
        record_property("op_db", [(eid, R.area(op.name), "pass" if not result.failures
                                   else "fail", resolved.where, detail, known.get(eid, ""))])
        assert not result.failures, f"{eid} ({resolved.where}) differs from torch:\n" + \
            "\n".join(result.failures)

    def test_op_db_shard_coverage(record_property):
        """Records this shard's excluded and unresolved entries for the coverage report; a
        known failure must name a resolved entry (an excluded or unresolved one cannot fail)."""
        record_property("op_db_torch", str(torch.__version__))
        record_property("op_db", [(eid, R.area(eid), status, "", info, "")
                                  for eid, status, info in others])
        stale = sorted(eid for eid, _, _ in others if eid in known)
        assert not stale, ("known_failures.yaml lists entries that are not resolved (remove "
                           f"them): {stale}")

    return test_op_db_entry, test_op_db_shard_coverage
