"""Process-wide thread settings: ember.set_num_threads governs BLAS (through threadpoolctl) and
ember's own loops; the BLAS lock keeps ember's BLAS calls consistent across Python threads."""
import ast
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ember
from ember.kernels import conv as C
from ember.kernels import linalg
from ember.kernels.runtime import threadpool, threads
from ember.kernels.conv import parallel

HARD_TIMEOUT = 60   # seconds before a blocked thread counts as a hang (normal runs take < 2 s)


@pytest.fixture
def restore_threads():
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)
    ember.set_conv_blas_limit(True)


def _daemon(fn):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def _blas_counts():
    return [c.get_num_threads() for c in threads.blas_controllers()]


def test_set_num_threads_limits_blas(restore_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    ember.set_num_threads(1)
    assert ember.get_num_threads() == 1
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)


def test_a_background_compile_takes_a_core_from_embers_threads(restore_threads, monkeypatch):
    """While the compile thread says a compile runs (``compiling``), ember's kernels split over
    one thread fewer than the host's cores (``working_threads``) and BLAS follows at the next
    mode entered; ``get_num_threads`` (the setting) is unchanged, a count set meanwhile applies
    within the cap and stays after it, and the end of the compile restores everything."""
    pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    ember.set_num_threads(3)
    before = _blas_counts()
    try:
        threads.compiling(True)
        assert (threads.working_threads(), ember.get_num_threads()) == (2, 3)
        with threads.blas_mode(threads.FREE):
            assert _blas_counts() == [min(n, 2) for n in before]
        ember.set_num_threads(1)
        assert threads.working_threads() == 1
        ember.set_num_threads(3)
        assert threads.working_threads() == 2
    finally:
        threads.compiling(False)
    with threads.blas_mode(threads.FREE):
        assert _blas_counts() == before
    assert threads.working_threads() == ember.get_num_threads() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    try:
        threads.compiling(True)
        assert threads.working_threads() == 1     # never below one
    finally:
        threads.compiling(False)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_set_num_threads_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="set_num_threads"):
        ember.set_num_threads(bad)


_LATE_BLAS = r"""
import numpy as np
import ember
from ember.kernels import linalg
from ember.kernels.conv import parallel
from threadpoolctl import threadpool_info

def counts():
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

first = set(counts())
ember.set_num_threads(1)
import scipy.linalg  # noqa: E402,F401  (its own OpenBLAS, loaded after ember)
late = set(counts()) - first
if not late:
    print("no-late-blas")
    raise SystemExit
linalg.matmul(np.ones((2, 2)), np.ones((2, 2)))
print("configured", sorted(counts()[p] for p in late))
ember.set_num_threads(2)
with parallel.policy(True):
    print("limited", sorted(counts().values()))
print("restored", sorted(counts()[p] for p in late))
"""


def test_blas_loaded_after_ember_gets_the_settings():
    """SciPy's own OpenBLAS, loaded after ember, follows set_num_threads and the convolution
    limit (threadpoolctl's controller is rebuilt when modules were imported)."""
    pytest.importorskip("threadpoolctl")
    pytest.importorskip("scipy")
    out = subprocess.run([sys.executable, "-c", _LATE_BLAS], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "no-late-blas":
        pytest.skip("SciPy shares NumPy's BLAS here")
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["configured"] == "[1]"
    assert set(ast.literal_eval(lines["limited"])) == {1}
    assert lines["restored"] == "[2]"


def test_convolution_in_a_worker_thread_limits_blas(restore_threads):
    """threadpoolctl lets only the first thread that set an OpenBLAS limit set it again (here the
    main thread, through set_num_threads); a convolution in another thread still holds BLAS at
    one thread, and restores it after."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def counts():
        info = threadpoolctl.threadpool_info()
        return [i["num_threads"] for i in info if i["user_api"] == "blas"]
    ember.set_num_threads(2)
    seen = []

    def conv():
        with parallel.policy(True):
            seen.append(counts())
    _daemon(conv).join(HARD_TIMEOUT)
    assert seen and all(n == 1 for n in seen[0])
    assert all(n == 2 for n in counts())


def test_gemm_in_another_thread_waits_for_a_limited_convolution(restore_threads, monkeypatch):
    """While a convolution holds BLAS at one thread, ember's GEMMs on BLAS's own threads
    elsewhere wait (they would otherwise run at a thread count that changes their bits); one
    below SMALL_GEMM_MACS runs on one thread anyway and goes at once (as a split GEMM does:
    ``test_split_gemm_in_another_thread_joins_a_limited_convolution``)."""
    monkeypatch.setattr(linalg, "SPLIT_GEMM", False)
    ember.set_num_threads(2)
    n = int(round(linalg.SMALL_GEMM_MACS ** (1 / 3))) + 2
    m = int(round(linalg.BLAS_SERIAL_MACS ** (1 / 3))) + 2     # one BLAS thread: LIMITED
    a, small = np.ones((n, n)), np.ones((m, m))
    done, small_done = threading.Event(), threading.Event()
    with parallel.policy(True):
        assert all(c == 1 for c in _blas_counts())
        t_small = _daemon(lambda: (linalg.matmul(small, small), small_done.set()))
        assert small_done.wait(HARD_TIMEOUT)
        t = _daemon(lambda: (linalg.matmul(a, a), done.set()))
        assert not done.wait(0.3)
    assert done.wait(HARD_TIMEOUT)
    t.join(HARD_TIMEOUT)
    t_small.join(HARD_TIMEOUT)


def test_split_gemm_in_another_thread_joins_a_limited_convolution(restore_threads, monkeypatch):
    """A GEMM split over the TBB threads (``linalg.gemm_into``) runs its blocks with BLAS at one
    thread, the count a limited convolution holds: it goes at once, and BLAS is back at its
    own count after both."""
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(compiler, "compile_mode", lambda: "sync")
    ember.set_num_threads(2)
    n = int(round(linalg.SPLIT_GEMM_MIN_MACS ** (1 / 3))) + 2
    a = np.ones((n, n), np.float32)
    if threads.parallel_layer() != "tbb" or not linalg.split_into(a, a, np.empty_like(a),
                                                                   True, 2):
        pytest.skip("the split product needs Numba's TBB layer and NumPy's own OpenBLAS")
    counts = _blas_counts()
    done = threading.Event()
    with parallel.policy(True):
        t = _daemon(lambda: (np.testing.assert_array_equal(linalg.matmul(a, a), a @ a),
                             done.set()))
        assert done.wait(HARD_TIMEOUT)
    t.join(HARD_TIMEOUT)
    assert _blas_counts() == counts


def test_limited_convolution_waits_for_a_gemm_in_flight(restore_threads):
    ember.set_num_threads(2)
    entered = threading.Event()

    def conv():
        with parallel.policy(True):
            entered.set()
    with threads.blas_mode(threads.FREE):
        t = _daemon(conv)
        assert not entered.wait(0.3)
    assert entered.wait(HARD_TIMEOUT)
    t.join(HARD_TIMEOUT)


def test_nested_and_pool_worker_requests_do_not_wait(restore_threads):
    """A GEMM inside a limited call, in its own thread or in a chunk on a pool worker, runs at
    once under the limit already held."""
    ember.set_num_threads(2)
    a = np.arange(16.0).reshape(4, 4)
    results = []

    def work():
        with parallel.policy(True):
            results.append(linalg.matmul(a, a))
            parts = parallel.run(lambda lo, hi: linalg.matmul(a[lo:hi], a), 4)
            results.append(np.concatenate(parts))
    _daemon(work).join(HARD_TIMEOUT)
    assert len(results) == 2
    for r in results:
        np.testing.assert_array_equal(r, a @ a)


def test_set_num_threads_inside_a_limited_call_applies_after_it(restore_threads):
    """The count set during a limited call is the one restored when it ends (the call's saved
    counts do not overwrite it), and the limit holds until then."""
    pytest.importorskip("threadpoolctl")
    ember.set_num_threads(2)
    with parallel.policy(True):
        ember.set_num_threads(3)
        assert all(n == 1 for n in _blas_counts())
    assert _blas_counts() and all(n == 3 for n in _blas_counts())


def test_set_num_threads_waits_for_gemms_in_flight(restore_threads):
    pytest.importorskip("threadpoolctl")
    ember.set_num_threads(2)
    done = threading.Event()
    with threads.blas_mode(threads.FREE):
        t = _daemon(lambda: (ember.set_num_threads(1), done.set()))
        assert not done.wait(0.3)
        assert all(n == 2 for n in _blas_counts())
    assert done.wait(HARD_TIMEOUT)
    t.join(HARD_TIMEOUT)
    assert all(n == 1 for n in _blas_counts())


def test_conv_blas_limit_switch(restore_threads):
    """With the limit off, a convolution never changes BLAS thread counts and runs inline."""
    pytest.importorskip("threadpoolctl")
    ember.set_num_threads(2)
    ember.set_conv_blas_limit(False)
    assert not ember.get_conv_blas_limit()
    before = _blas_counts()
    with parallel.policy(True):
        assert _blas_counts() == before and not parallel.parallel_possible()
    x = np.random.default_rng(0).standard_normal((2, 4, 9, 9))
    w = np.random.default_rng(1).standard_normal((4, 4, 3, 3))
    ember.set_conv_blas_limit(True)
    expected = C.conv2d_forward(x, w, None, 1, 1, 1, 1)
    ember.set_conv_blas_limit(False)
    np.testing.assert_allclose(C.conv2d_forward(x, w, None, 1, 1, 1, 1), expected, rtol=1e-12,
                               atol=1e-12)


def _fused_kernel():
    from ember.kernels.pointwise import Expr, compile_pointwise
    expr = Expr(("x", "y"), [("t", "mul", ("x", "y")), ("u", "tanh", ("t",)),
                             ("r", "add", ("u", 1.0))], ("r",))
    x = np.random.default_rng(2).standard_normal(300000).astype(np.float32)
    k = compile_pointwise(expr, (x, x))
    return lambda: k(x, x[::-1].copy())[0]


def _workload():
    rng = np.random.default_rng(3)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    ops = []
    for N, Cin, H, K, R, p in [(8, 32, 16, 64, 3, 1),    # weight Winograd (own threads),
                               (2, 3, 16, 16, 5, 2),     # forward im2col (BLAS threads); direct
                               (2, 16, 12, 16, 1, 0)]:   # 1x1
        x, w = arr(N, Cin, H, H), arr(K, Cin, R, R)
        gy = arr(N, K, H + 2 * p - R + 1, H + 2 * p - R + 1)
        ops.append(lambda x=x, w=w, p=p, gy=gy: C.conv2d_weight_grad(gy, x, w.shape, 1, p, 1, 1))
        ops.append(lambda x=x, w=w, p=p: C.conv2d_forward(x, w, None, 1, p, 1, 1))
        ops.append(lambda x=x, w=w, p=p, gy=gy: C.conv2d_input_grad(gy, w, x.shape, 1, p, 1, 1))
    a, b = arr(257, 1000), arr(1000, 33)     # OpenBLAS's bits differ between 1 and 2 threads
    ops.append(lambda: linalg.matmul(a, b))
    x64, w33 = a[:64, :300], np.ascontiguousarray(b.T[:, :300])
    ops.append(lambda: linalg.linear(x64, w33))
    ops.append(_fused_kernel())
    return ops


def test_concurrent_kernels_while_the_thread_count_changes(restore_threads, monkeypatch):
    """4 Python threads run convolutions (own-threads and BLAS-threads paths), GEMMs and a fused
    pointwise kernel while a fifth calls set_num_threads(2 or 3) over and over (from a fresh
    pool, so it grows meanwhile). Each result is bitwise one of the serial results at thread
    count 2 or 3 (a call runs at one count from start to end; which one depends on timing), and
    nothing hangs. A GEMM run under another thread's one-thread convolution limit would give
    other bits ((257x1000) @ (1000x33) float32 differs between one and two BLAS threads)."""
    monkeypatch.setattr(threadpool, "_pool", None)
    monkeypatch.setattr(threadpool, "_pool_size", 0)
    ops = _workload()
    counts = (2, 3)
    serial = {}
    for n in counts:
        ember.set_num_threads(n)
        serial[n] = [op() for op in ops]
    threadpoolctl = sys.modules.get("threadpoolctl")
    if threadpoolctl is not None:   # as in a fresh process: no thread has set a BLAS limit yet
        threadpoolctl.OpenBLASController.clear_controlling_thread(force=True)
    results, errors = [[] for _ in range(4)], []
    finished, started = threading.Event(), threading.Event()

    def worker(i):
        try:
            for _ in range(2):
                results[i].append([])
                for op in ops:
                    results[i][-1].append(op())
                    started.set()
        except Exception as e:  # reported below
            errors.append(e)

    def toggler():
        started.wait(HARD_TIMEOUT)
        k = 0
        while not finished.is_set():
            ember.set_num_threads(counts[k % 2])
            k += 1
            time.sleep(0.001)
    toggle = _daemon(toggler)
    workers = [_daemon(lambda i=i: worker(i)) for i in range(4)]
    deadline = time.monotonic() + HARD_TIMEOUT
    for t in workers:
        t.join(max(0.0, deadline - time.monotonic()))
    finished.set()
    toggle.join(max(1.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in workers + [toggle]), "a thread hung"
    assert not errors, errors[0]
    for per_thread in results:
        assert len(per_thread) == 2
        for run in per_thread:
            for j, r in enumerate(run):
                assert any(np.array_equal(r, serial[n][j]) for n in counts), f"op {j}"


def test_environment_switches_apply_at_import():
    code = ("import ember; from ember.kernels.runtime import threads as r; "
            "print(ember.get_memory_reuse(), ember.get_conv_blas_limit(), r._requested)")
    env = {**os.environ, "EMBER_MEMORY_REUSE": "0", "EMBER_CONV_BLAS_LIMIT": "0",
           "EMBER_THREADING_LAYER": "pool"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.split() == ["False", "False", "pool"], out.stderr


def test_parallel_layer_switch():
    with pytest.raises(ValueError, match="set_parallel_layer"):
        ember.set_parallel_layer("omp")
    before = threads._requested
    try:
        ember.set_parallel_layer("pool")
        assert threads.parallel_layer() == "pool"
    finally:
        ember.set_parallel_layer(before)


def test_a_parallel_kernels_first_compile_starts_embers_threading_layer():
    """Compiling a ``parallel=True`` kernel through ``compiler.ready`` before any other
    parallel work starts ember's layer (TBB), not Numba's default (OpenMP): otherwise every
    ``prange`` of the process would run there and the TBB-only paths would turn off."""
    if threads.parallel_layer() != "tbb":
        pytest.skip("Numba's TBB threading layer is not available")
    code = (
        "import numba, numpy as np\n"
        "from numba import njit, prange\n"
        "from ember.kernels.runtime import compiler as rt\n"
        "from ember.kernels.runtime.threads import parallel_layer\n"
        "@njit(parallel=True)\n"
        "def k(a):\n"
        "    for i in prange(a.shape[0]):\n"
        "        a[i] = i\n"
        "a = np.zeros(4)\n"
        "assert rt.ready(k, rt.signature(a), force=True)\n"
        "k(a)\n"
        "print(numba.threading_layer(), parallel_layer())\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_THREADING_LAYER", "EMBER_THREADING_LAYER")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.split() == ["tbb", "tbb"], out.stderr


def test_fork_while_other_threads_hold_the_blas_lock_and_the_pool():
    """A forked child has only the forking thread: a BLAS mode held by another thread (a limited
    convolution in flight) is dropped there, its saved BLAS counts restored, and the child's
    parallel loops start a pool of their own (they waited forever for the parent's)."""
    code = """
        import os, threading, numpy as np
        import ember
        from ember.kernels.runtime import threadpool, threads
        ember.set_num_threads(2)
        assert threadpool.run_chunks(lambda lo, hi: hi - lo, 8, 4, 2) == [2, 2, 2, 2]
        held, release = threading.Event(), threading.Event()
        def hold():
            with threads.blas_mode(threads.LIMITED):
                held.set()
                release.wait()
        t = threading.Thread(target=hold, daemon=True)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with threads.blas_mode(threads.FREE):
                    a = np.ones((64, 64), np.float32)
                    assert (a @ a == 64).all()
                assert threadpool.run_chunks(lambda lo, hi: hi - lo, 8, 4, 2) == [2, 2, 2, 2]
                counts = {c.get_num_threads() for c in threads.blas_controllers()}
                assert counts <= {2}, counts
                code = 0
            finally:
                os._exit(code)
        release.set()
        assert os.waitpid(pid, 0)[1] == 0
        print("ok")
    """
    import textwrap
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=HARD_TIMEOUT)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_fork_while_another_thread_chooses_the_threading_layer():
    """The lock guarding the choice of Numba's threading layer (held for a whole ``import numba``
    when a parallel kernel comes first) is new in a forked child, which can choose its layer
    (it waited forever for the parent's thread)."""
    code = """
        import os, signal
        from ember.kernels.runtime import threads
        threads.set_parallel_layer("pool")   # not chosen yet; choosing it needs no Numba
        threads._layer_lock.acquire()        # as a thread starting the layer holds it
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)
            os._exit(0 if threads.parallel_layer() == "pool" else 1)
        threads._layer_lock.release()
        assert os.waitpid(pid, 0)[1] == 0
        print("ok")
    """
    import textwrap
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=HARD_TIMEOUT)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


_RESCANS = """
import sys, types, ember
from ember.kernels.runtime import threads
import threadpoolctl
made = []
real = threadpoolctl.ThreadpoolController
class Counting(real):
    def __init__(self, *a, **k):
        made.append(1)
        super().__init__(*a, **k)
threadpoolctl.ThreadpoolController = Counting
threads.blas_controllers()
base = len(made)
for i in range(20):                          # pure-Python modules: no new look
    sys.modules[f"_ember_test_plain_{i}"] = types.ModuleType(f"_ember_test_plain_{i}")
    threads.blas_controllers()
plain = len(made) - base
loaded = "_decimal" in sys.modules
import _decimal                              # a compiled extension module without a BLAS
threads.blas_controllers()
threads.blas_controllers()
decimal = len(made) - base - plain
before = len(threads.blas_controllers())
with threads.importing_many():               # (as Numba's import on the compile thread)
    try:
        import scipy.linalg                  # its own OpenBLAS: one new look, after the block
    except ImportError:
        scipy = None
    threads.blas_controllers()
    inside = len(made) - base - plain - decimal
if scipy is None:
    scipy_looks, new_blas = "-", "-"
else:
    threads.blas_controllers()
    scipy_looks = len(made) - base - plain - decimal - inside
    new_blas = len(threads.blas_controllers()) - before
print(plain, decimal, inside, scipy_looks, new_blas)
"""


def test_blas_is_looked_for_again_only_when_a_blas_was_loaded():
    """Numba's background import adds pure-Python modules through a cold process's first calls;
    each used to rebuild threadpoolctl's controller (123 times, 37 ms, in LeNet-5's first five
    steps), and then each compiled extension module did (17 looks of 3-10 ms in LeNet-5's
    first 30 steps). Only a shared object named as a BLAS is looked at: SciPy's OpenBLAS is
    found (one look), the standard library's ``_decimal`` brings none (not looked at: the
    standard library's extension modules never do), and an import inside ``importing_many``
    is looked at once, after the block (none inside it)."""
    pytest.importorskip("threadpoolctl")
    out = subprocess.run([sys.executable, "-c", _RESCANS], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    plain, decimal, inside, scipy_looks, new_blas = out.stdout.split()
    assert (plain, decimal, inside) == ("0", "0", "0")
    if new_blas not in ("-", "0"):      # SciPy brought a BLAS of its own: found by one look
        assert scipy_looks == "1"


@pytest.mark.parametrize("env, expected", [
    ({"OMP_NUM_THREADS": "1"}, "1"),
    ({"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "2"}, "2"),
    ({"OMP_NUM_THREADS": "3", "EMBER_NUM_THREADS": "1"}, "1"),
    ({"OMP_NUM_THREADS": "zero"}, "cores"),
    ({"NUMBA_NUM_THREADS": "1"}, "1"),
    ({"OMP_NUM_THREADS": "3", "NUMBA_NUM_THREADS": "2"}, "2"),
    ({}, "cores")])
def test_default_thread_count_follows_torchs_environment_rule(env, expected):
    """As torch: OMP_NUM_THREADS, MKL_NUM_THREADS over it (EMBER_NUM_THREADS over both), an
    invalid value ignored with a warning, else the core count; never over NUMBA_NUM_THREADS
    (the threads ember's parallel kernels run on)."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "EMBER_NUM_THREADS",
                         "NUMBA_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-W", "always", "-c",
                          "import os, ember; print(ember.get_num_threads(), os.cpu_count() or 1)"],
                         env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got, cores = out.stdout.split()
    assert got == (cores if expected == "cores" else expected)
    assert ("ignoring OMP_NUM_THREADS='zero'" in out.stderr) == (env.get("OMP_NUM_THREADS") == "zero")


def test_tbb_parts_leaves_the_layer_unchosen_while_numba_imports_on_the_compile_thread(
        monkeypatch):
    """Choosing the parallel layer imports Numba; while its first import runs on the compile
    thread, ``tbb_parts`` answers 0 (ember's pool) instead of importing it on the caller's
    thread, and chooses once the import is done."""
    from ember.kernels.runtime import compiler
    monkeypatch.setattr(threads, "_layer", None)
    monkeypatch.setattr(compiler, "importing", lambda name: name == "numba")

    def choose():
        raise AssertionError("the layer was chosen while Numba was importing")
    monkeypatch.setattr(threads, "_start", choose)
    assert threads.tbb_parts(64, 4) == 0 and threads._layer is None
    monkeypatch.setattr(compiler, "importing", lambda name: False)
    monkeypatch.setattr(threads, "_start", lambda: "pool")
    assert threads.tbb_parts(64, 4) == 0 and threads._layer == "pool"


_SPIN = """
import ember, numpy as np
from ember.kernels.runtime import threads
x = ember.randn(256, 256)
y = (x @ x).numpy()
ok = np.allclose(y, x.numpy().astype(np.float64) @ x.numpy().astype(np.float64), atol=1e-3)
waits = [lib.openblas_thread_timeout() for lib in threads.numpy_openblas()
         if hasattr(lib, "openblas_read_env")]
print(ok, waits)
"""


@pytest.mark.parametrize("env,expected", [({}, threads.BLAS_SPIN_LOG2),
                                          ({"OPENBLAS_THREAD_TIMEOUT": "12"}, 12)])
def test_openblas_idle_wait_is_shortened_unless_the_environment_sets_it(env, expected):
    """``import ember`` shortens the idle wait of NumPy's OpenBLAS to 2^BLAS_SPIN_LOG2 cycles
    (its workers start again; products are unchanged); a wait the environment sets stays."""
    full = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", _SPIN], capture_output=True, text=True,
                         env={**full, **env}, timeout=120)
    assert out.returncode == 0, out.stderr
    ok, waits = out.stdout.split(" ", 1)
    assert ok == "True"
    waits = ast.literal_eval(waits)
    if not waits:
        pytest.skip("NumPy here bundles no OpenBLAS with a readable idle wait")
    assert set(waits) == {expected}


def test_openblas_functions_are_found_under_their_build_names():
    class Library:   # NumPy's OpenBLAS renames its symbols: scipy_ prefix, 64_ suffix (ILP64)
        scipy_cblas_sgemm64_ = "ilp64"
        cblas_sgemm = "lp64"
        openblas_get_corename = "plain"
    assert threads.openblas_function(Library, "cblas_sgemm") == ("ilp64", True)
    assert threads.openblas_function(Library, "openblas_get_corename") == ("plain", False)
    assert threads.openblas_function(Library, "missing") == (None, False)
    if threads.numpy_openblas():      # this NumPy's own library has its sgemm under one
        assert threads.openblas_function(threads.numpy_openblas()[0], "cblas_sgemm")[0]
