"""benchmarks/instructions.py: its reading of callgrind's dumps, its choice of N, its table and
its listing of the suites' ember workers (no valgrind run here; nothing is timed)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import instructions as I  # noqa: E402

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  python benchmarks/instructions.py _worker
part: 3

desc: I1 cache:
desc: Trigger: Client Request: m7-n20

positions: line
events: Ir
summary: 123456789

fl=(1) ???
fn=(1) PyEval
0 123456000
fn=(2) other
0 789

totals: 123456789
"""


def test_totals_reads_the_trigger_and_the_instruction_total(tmp_path):
    path = tmp_path / "cg.out.3"
    path.write_text(DUMP)
    assert I.totals(str(path)) == ("m7-n20", 123456789, False)
    # a window in which LLVM ran (a kernel compiled while counted) is told apart
    path.write_text(DUMP.replace("fl=(1) ???", "ob=(2) /x/llvmlite/binding/libllvmlite.so\n"
                                 "fl=(1) ???"))
    assert I.totals(str(path)) == ("m7-n20", 123456789, True)


def test_choose_n_fits_the_window():
    # 3N steps of native_ms at SLOWDOWN x must fit WINDOW_S; at least one step
    assert I.choose_n(1e6) == 1
    assert I.choose_n(1e-6) == I.NICE[-1]
    n = I.choose_n(1.0)
    assert 3 * n * 1e-3 * I.SLOWDOWN <= I.WINDOW_S
    bigger = I.NICE[I.NICE.index(n) + 1]
    assert 3 * bigger * 1e-3 * I.SLOWDOWN > I.WINDOW_S


def test_keys_find_the_measurements_in_a_worker_result():
    result = {"lib": "ember", "add": {"_instr_index": 0, "median": 0.0},
              "nested": {"fwd": {"_instr_index": 1}}, "sample": [1.0]}
    assert I._keys(result) == {0: "add", 1: "nested/fwd"}


def test_planned_counts_take_the_plan_n_and_only_the_selected_keys():
    native = {0: {"native_ms": 1e6}, 1: {"native_ms": 1e-6}, 2: {"native_ms": 1e6}}
    keys = {0: "gelu_fwd:eager", 1: "lstm_cell:eager", 2: "lstm_cell:fused"}
    plan = {"lstm_cell:fused": 3}
    assert I.planned_counts(native, keys, plan) == {"0": 1, "1": I.NICE[-1], "2": 3}
    assert I.planned_counts(native, keys, plan, ["lstm_cell"]) == {"1": I.NICE[-1], "2": 3}
    assert I.planned_counts(native, keys, plan, ["fused", "gelu"]) == {"0": 1, "2": 3}


def test_table_gives_ratios_to_the_first_result_and_marks_slower_cases():
    def res(commit, add, chain):
        ms = {"add": {"n": 10, "per_iter": add}}
        if chain is not None:
            ms["chain"] = {"n": 1, "per_iter": chain}
        return {"commit": commit, "workers": {"eager/ember/ops": {"measurements": ms}}}
    text = I.table([res("aaa", 1000.0, 2000.0), res("bbb", 1100.0, None),
                    res("ccc", 1020.0, 2000.0)])
    lines = text.splitlines()
    assert lines[0] == ("| case | N | instr/iter aaa | instr/iter bbb | instr/iter ccc | "
                        "bbb / aaa | ccc / aaa |")
    assert lines[2] == ("| eager/ember/ops add | 10 | 1,000 | 1,100 | 1,020 | **1.100** | "
                        "1.020 |")
    assert lines[3] == "| eager/ember/ops chain | 1 | 2,000 | - | 2,000 | - | 1.000 |"


def test_listing_names_the_ember_workers_and_leaves_out_the_cold_rows():
    listing = I.list_workers(ROOT, ["eager", "train_step"])
    names = [w["name"] for w in listing["workers"]]
    assert names[0] == "eager/ember/ops"
    assert "train_step/ember/mlp" in names and "train_step/ember/lenet" in names
    assert not any("torch" in n for n in names)
    skipped = dict(listing["skipped"])
    assert "train_step/ember/lenet_cold" in skipped
    assert "train_step/ember/lenet_cold" not in names
