"""The op_db harness itself: it must catch wrong values, dtypes, gradients and non-contiguous
failures, check sort-like indices by what they select, keep its lists consistent with op_db, and
count correctly in the report."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

from tests.op_db import report  # noqa: E402
from tests.op_db import resolve as R  # noqa: E402


def _op(name, variant=""):
    return next(o for o in R.op_db() if o.name == name and o.variant_test_name == variant)


def _run(name, fn):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return R.run_entry(_op(name), R.Resolved("function", name, fn), torch)


def test_resolves_functions_namespaces_methods_and_attributes():
    assert R.resolve(_op("abs")).where == "ember.abs"
    assert R.resolve(_op("nn.functional.relu")).where == "ember.nn.functional.relu"
    assert R.resolve(_op("T")).kind == "attribute"
    assert R.resolve(_op("__radd__")).kind == "method"
    assert R.entry_id(_op("div", "floor_rounding")) == "div.floor_rounding"
    assert R.classify(_op("to_sparse"))[0] == "excluded"


def test_the_real_op_passes_with_gradients_and_noncontiguous_inputs():
    result = _run("abs", ember.abs)
    assert not result.failures and result.ran > 0 and result.grads > 0


def test_wrong_values_are_caught():
    result = _run("abs", ember.neg)
    assert result.failures and "values differ" in result.failures[0]


def test_wrong_dtype_is_caught():
    result = _run("abs", lambda x: ember.abs(x).double())
    assert result.failures and "dtype float64, torch float32" in result.failures[0]


def test_wrong_gradient_is_caught():
    result = _run("abs", lambda x: ember.abs(x.detach()) + x * 0)
    assert result.failures and "grad of input 0" in result.failures[0]


def test_failure_on_noncontiguous_input_is_caught():
    def contiguous_only(x):
        if not x.is_contiguous():
            raise ValueError("strided input")
        return ember.abs(x)

    result = _run("abs", contiguous_only)
    assert result.failures and all("non-contiguous" in f for f in result.failures)


def test_tied_sort_indices_are_checked_by_what_they_select():
    sample = type("Sample", (), {"input": torch.tensor([1, 1, 0]), "args": (), "kwargs": {}})
    t_out = torch.sort(sample.input)
    values = ember.tensor([0, 1, 1])
    for idx, ok in (([2, 1, 0], True), ([2, 0, 1], True), ([0, 1, 2], False)):
        e_out = (values, ember.tensor(idx))
        if ok:
            assert R._check_tied_indices(_op("sort"), sample, t_out, e_out, torch) == 1
        else:
            with pytest.raises(R.Mismatch, match="select other values"):
                R._check_tied_indices(_op("sort"), sample, t_out, e_out, torch)


def test_lists_name_op_db_entries_and_do_not_overlap():
    ids = {R.entry_id(o) for o in R.op_db()}
    assert not set(R.excluded()) - ids, "excluded.yaml names entries op_db does not have"
    assert not set(R.known_failures()) - ids, "known_failures.yaml names unknown entries"
    assert not set(R.excluded()) & set(R.known_failures())


def test_report_counts():
    records = {"a": ("torch / Tensor", "pass", "ember.a", "", ""),
               "b": ("torch / Tensor", "fail", "ember.b", "x", "dtype: no dtype= keyword"),
               "c": ("linalg", "unresolved", "", "", ""),
               "d": ("sparse", "excluded", "", "sparse layout", "")}
    text = "\n".join(report.build(records, "2.13.0", full=True))
    assert "4 entries, 1 excluded" in text
    assert "resolved: 2 of 3 in scope (66.7%; 50.0% of all entries)" in text
    assert "passing every sample: 1 of 2 resolved (50.0%); failing: 1" in text
    assert "1  dtype" in text and "linalg (1): c" in text
