"""Tensor creation (ember/ops/creation.py) against torch: ndarray subclasses, the factories
(logspace, empty_strided, scalar_tensor, randint_like, ...) and the in-place random fills."""
import numpy as np
import pytest
import torch

import ember
from ember.errors import EmberError
from ember.utils.data import default_collate


@pytest.fixture
def memmap(tmp_path):
    mm = np.memmap(tmp_path / "a.bin", dtype=np.int64, mode="w+", shape=(3,))
    mm[:] = [1, 2, 3]
    return mm


@pytest.mark.parametrize("make", ["from_numpy", "as_tensor", "tensor"])
def test_memmap_tensor_promotes_as_a_tensor(memmap, make):
    """A tensor made from an np.memmap holds a plain ndarray: it promotes as a tensor, not as a
    Python scalar (stack of int64 memmap tensors was float32, ``+ 1`` float64)."""
    for m in (ember, torch):
        t = getattr(m, make)(memmap)
        assert str(m.stack([t, t]).dtype).endswith("int64")
        assert str(m.cat([t, t]).dtype).endswith("int64")
        assert str((t + 1).dtype).endswith("int64")
        assert str((t * 1.5).dtype).endswith("float32")
    assert type(ember.from_numpy(memmap)._data) is np.ndarray


@pytest.mark.parametrize("make", ["from_numpy", "as_tensor"])
def test_memmap_tensor_shares_memory_as_torch(memmap, make):
    t = getattr(ember, make)(memmap)
    t[0] = 7
    assert memmap[0] == 7
    memmap[1] = 9
    assert t.tolist() == [7, 9, 3]


def test_matrix_becomes_a_plain_tensor_as_torch():
    mat = np.matrix([[1, 2], [3, 4]])
    for make in ("tensor", "as_tensor", "from_numpy"):
        t = getattr(ember, make)(mat)
        assert type(t._data) is np.ndarray
        assert (t[0] * t[0]).tolist() == getattr(torch, make)(mat)[0].pow(2).tolist()
    assert list(default_collate([mat, mat]).shape) == list(
        torch.utils.data.default_collate([mat, mat]).shape)


# ------------------------------------------------------------------ random creators' overloads
def _rand_cases(m):
    x, xi = m.ones(2, 3), m.ones(2, 3, dtype=m.int32)
    return {
        "randint(high, size)": lambda: m.randint(10, (3,)),
        "randint(low, high, size)": lambda: m.randint(3, 10, (3,)),
        "randint(high=, size=)": lambda: m.randint(high=10, size=(3,)),
        "randint(low=, high=, size=)": lambda: m.randint(low=2, high=10, size=(3,)),
        "randint(high, size=)": lambda: m.randint(10, size=(3,)),
        "randint(low, high, size=list)": lambda: m.randint(2, 10, size=[2, 2]),
        "randint dtype": lambda: m.randint(10, (3,), dtype=m.float32),
        "randint requires_grad": lambda: m.randint(10, (2, 3), dtype=m.float32,
                                                   requires_grad=True),
        "randint bool": lambda: m.randint(2, (3,), dtype=m.bool),
        "randint uint8 full range": lambda: m.randint(0, 256, (3,), dtype=m.uint8),
        "rand(2, 3)": lambda: m.rand(2, 3),
        "rand((2, 3))": lambda: m.rand((2, 3)),
        "rand([2, 3])": lambda: m.rand([2, 3]),
        "rand(size=)": lambda: m.rand(size=(2, 3)),
        "rand(()) 0-d": lambda: m.rand(()),
        "rand float64 requires_grad": lambda: m.rand(2, 3, dtype=m.float64, requires_grad=True),
        "randn(2, 3)": lambda: m.randn(2, 3),
        "randn(size=)": lambda: m.randn(size=[2]),
        "randn float64 requires_grad": lambda: m.randn((2, 3), dtype=m.float64,
                                                       requires_grad=True),
        "randn complex": lambda: m.randn(2, dtype=m.complex64),
        "rand complex": lambda: m.rand(2, 3, dtype=m.complex128),
        "randperm": lambda: m.randperm(5),
        "randperm(n=)": lambda: m.randperm(n=4),
        "randperm dtype requires_grad": lambda: m.randperm(5, dtype=m.float32,
                                                           requires_grad=True),
        "randperm(0)": lambda: m.randperm(0),
        "randint_like(x, high)": lambda: m.randint_like(x, 10),
        "randint_like(x, low, high)": lambda: m.randint_like(x, 3, 10),
        "randint_like(x, high=)": lambda: m.randint_like(x, high=10),
        "randint_like(xi, dtype)": lambda: m.randint_like(xi, 10, dtype=m.float64),
        "rand_like": lambda: m.rand_like(x),
        "rand_like(xi, dtype)": lambda: m.rand_like(xi, dtype=m.float64),
        "randn_like dtype": lambda: m.randn_like(x, dtype=m.float64),
        "normal(float, float, size)": lambda: m.normal(0., 1., (2, 3)),
        "normal(size=)": lambda: m.normal(0., 1., size=(2, 3)),
        "normal(tensor, float)": lambda: m.normal(x, 1.),
        "normal(float, tensor)": lambda: m.normal(0., x),
        "normal(tensor, tensor)": lambda: m.normal(x, x),
        "normal(mean=tensor)": lambda: m.normal(mean=x),
        "normal(float64 tensor)": lambda: m.normal(m.ones(2, dtype=m.float64), 1.),
        "normal(requires_grad mean)": lambda: m.normal(m.ones(2, requires_grad=True), 1.),
        "bernoulli(p tensor)": lambda: m.bernoulli(x * 0.5),
        "bernoulli(x, p)": lambda: m.bernoulli(x, 0.3),
        "bernoulli(x, p=)": lambda: m.bernoulli(x, p=0.3),
        "bernoulli(int x, p)": lambda: m.bernoulli(m.ones(2, 3, dtype=m.int64), 0.3),
        "multinomial": lambda: m.multinomial(x, 2),
        "multinomial replacement": lambda: m.multinomial(x, 5, True),
        "multinomial 1-d": lambda: m.multinomial(x[0], 2),
        "multinomial keywords": lambda: m.multinomial(x, num_samples=2, replacement=True),
        "poisson": lambda: m.poisson(x * 3),
        "poisson float64 requires_grad": lambda: m.poisson(
            m.full((2, 3), 2., dtype=m.float64, requires_grad=True)),
        "binomial": lambda: m.binomial(m.full((2, 3), 5.), x * 0.5),
        "binomial broadcast": lambda: m.binomial(m.tensor([10., 3.]), m.tensor([.5])),
    }


_RAND_ERRORS = {
    "randint(high) no size": lambda m: m.randint(10),
    "randint low >= high": lambda m: m.randint(5, 3, (2,)),
    "randint int size": lambda m: m.randint(10, 3),
    "randint(low=, size=) no high": lambda m: m.randint(low=2, size=(3,)),
    "randint float high": lambda m: m.randint(10., (3,)),
    "randint bool high": lambda m: m.randint(True, (3,)),
    "randint beyond uint8": lambda m: m.randint(300, (3,), dtype=m.uint8),
    "randint negative uint8": lambda m: m.randint(-1, 10, (3,), dtype=m.uint8),
    "randint beyond bool": lambda m: m.randint(10, (3,), dtype=m.bool),
    "randint int requires_grad": lambda m: m.randint(10, (2,), requires_grad=True),
    "rand int dtype": lambda m: m.rand(2, dtype=m.int64),
    "rand bool dtype": lambda m: m.rand(2, dtype=m.bool),
    "rand float size": lambda m: m.rand(2.),
    "rand negative size": lambda m: m.rand(-1),
    "rand size twice": lambda m: m.rand(2, size=(2,)),
    "randn int dtype": lambda m: m.randn(2, dtype=m.int32),
    "randperm negative": lambda m: m.randperm(-1),
    "randperm float": lambda m: m.randperm(3.),
    "randperm beyond uint8": lambda m: m.randperm(300, dtype=m.uint8),
    "randint_like low >= high": lambda m: m.randint_like(m.ones(2), 5, 3),
    "randint_like float bound": lambda m: m.randint_like(m.ones(2), 2.5),
    "rand_like int": lambda m: m.rand_like(m.ones(2, dtype=m.int32)),
    "randn_like int": lambda m: m.randn_like(m.ones(2, dtype=m.int32)),
    "normal negative std": lambda m: m.normal(0., -1., (2,)),
    "normal tensor negative float std": lambda m: m.normal(m.ones(2), -1.),
    "normal negative std tensor": lambda m: m.normal(m.ones(2), -m.ones(2)),
    "normal floats no size": lambda m: m.normal(0., 1.),
    "normal tensors with size": lambda m: m.normal(m.ones(2), m.ones(2), (2,)),
    "bernoulli p > 1 tensor": lambda m: m.bernoulli(m.ones(2) * 2),
    "bernoulli p > 1 float": lambda m: m.bernoulli(m.ones(2), 1.5),
    "bernoulli int tensor": lambda m: m.bernoulli(m.ones(2, dtype=m.int32)),
    "multinomial too many": lambda m: m.multinomial(m.ones(2, 3), 5),
    "multinomial negative": lambda m: m.multinomial(-m.ones(2, 3), 2),
    "multinomial nan": lambda m: m.multinomial(m.tensor([1., float("nan")]), 1),
    "multinomial int": lambda m: m.multinomial(m.ones(2, 3, dtype=m.int32), 2),
    "multinomial zero samples": lambda m: m.multinomial(m.ones(2, 3), 0),
    "multinomial zero row": lambda m: m.multinomial(m.zeros(2, 3), 1),
    "multinomial 3-d": lambda m: m.multinomial(m.ones(2, 3, 4), 1),
    "poisson negative rate": lambda m: m.poisson(-m.ones(2)),
    "poisson nan rate": lambda m: m.poisson(m.tensor([float("nan")])),
    "poisson int rates": lambda m: m.poisson(m.ones(2, dtype=m.int64)),
    "binomial int count": lambda m: m.binomial(m.ones(2, dtype=m.int64), m.ones(2) / 2),
    "binomial int prob": lambda m: m.binomial(m.ones(2), m.ones(2, dtype=m.int64)),
    "binomial two dtypes": lambda m: m.binomial(m.ones(2, dtype=m.float64), m.ones(2) / 2),
    "binomial shapes": lambda m: m.binomial(m.ones(2), m.ones(3) / 2),
}


@pytest.mark.parametrize("case", list(_rand_cases(torch)))
def test_random_creator_overloads_match_torch(case):
    """Every overload of the random creators: same shape, dtype, requires_grad and range as
    torch (values are random)."""
    t, e = _rand_cases(torch)[case](), _rand_cases(ember)[case]()
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert e.requires_grad == t.requires_grad
    lo, hi, integral = _RANGES.get(case, (-np.inf, np.inf, False))
    for v in (e, t):
        if v.numel() and not v.dtype.is_complex:
            a = v.detach().double().numpy()
            assert lo <= a.min() and a.max() <= hi, (case, a)
            assert not integral or np.array_equal(a, np.round(a))


_RANGES = {  # case -> (lowest, highest, integral) a sample may take
    "randint(high, size)": (0, 9, True), "randint(low, high, size)": (3, 9, True),
    "randint(high=, size=)": (0, 9, True), "randint(low=, high=, size=)": (2, 9, True),
    "randint(high, size=)": (0, 9, True), "randint(low, high, size=list)": (2, 9, True),
    "randint dtype": (0, 9, True), "randint requires_grad": (0, 9, True),
    "randint bool": (0, 1, True), "randint uint8 full range": (0, 255, True),
    "rand(2, 3)": (0, 1, False), "rand((2, 3))": (0, 1, False), "rand([2, 3])": (0, 1, False),
    "rand(size=)": (0, 1, False), "rand(()) 0-d": (0, 1, False),
    "rand float64 requires_grad": (0, 1, False), "rand_like": (0, 1, False),
    "rand_like(xi, dtype)": (0, 1, False),
    "randperm": (0, 4, True), "randperm(n=)": (0, 3, True),
    "randperm dtype requires_grad": (0, 4, True),
    "randint_like(x, high)": (0, 9, True), "randint_like(x, low, high)": (3, 9, True),
    "randint_like(x, high=)": (0, 9, True), "randint_like(xi, dtype)": (0, 9, True),
    "bernoulli(p tensor)": (0, 1, True), "bernoulli(x, p)": (0, 1, True),
    "bernoulli(x, p=)": (0, 1, True), "bernoulli(int x, p)": (0, 1, True),
    "multinomial": (0, 2, True), "multinomial replacement": (0, 2, True),
    "multinomial 1-d": (0, 2, True), "multinomial keywords": (0, 2, True),
    "poisson": (0, np.inf, True), "poisson float64 requires_grad": (0, np.inf, True),
    "binomial": (0, 5, True), "binomial broadcast": (0, 10, True),
}


@pytest.mark.parametrize("case", list(_RAND_ERRORS))
def test_random_creator_bad_arguments_raise_as_torch(case):
    with pytest.raises(Exception) as te:
        _RAND_ERRORS[case](torch)
    with pytest.raises(ember.errors.EmberError) as ee:
        _RAND_ERRORS[case](ember)
    tt = type(te.value)
    assert isinstance(ee.value, tt), (tt, type(ee.value), str(ee.value))
    name = case.split(" ")[0].split("(")[0]
    assert name in str(ee.value) or "normal" in str(ee.value) or "bernoulli" in str(ee.value)


def test_randperm_is_a_permutation_and_multinomial_without_replacement_distinct():
    assert sorted(ember.randperm(7).tolist()) == list(range(7))
    rows = ember.multinomial(ember.ones(4, 6), 6).tolist()
    assert all(sorted(r) == list(range(6)) for r in rows)


def test_multinomial_without_replacement_past_the_nonzero_categories_as_torch():
    # torch 2.x samples by an exponential race: every nonzero category comes first, then
    # zero-probability ones (word2vec negatives over unigram^0.75 with unseen words)
    p = [[0.0, 0.3, 0.0, 0.7, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]]
    for lib in (torch, ember):
        lib.manual_seed(0)
        rows = lib.multinomial(lib.tensor(p), 4).tolist()
        assert all(sorted(r[:2]) == [1, 3] and set(r[2:]) <= {0, 2, 4} for r in rows[:1]), rows
        assert rows[1][0] == 2 and len(set(rows[1])) == 4
        one = lib.multinomial(lib.tensor([0.5, 0.5, 0.0]), 3).tolist()
        assert sorted(one[:2]) == [0, 1] and one[2] == 2


def test_poisson_and_binomial_draw_their_distributions():
    """Sample mean and variance of 200k draws at a fixed seed against the distributions' own
    (Poisson(3): 3 and 3; Binomial(10, 0.3): 3 and 2.1); the seed makes the draw repeatable."""
    ember.manual_seed(0)
    p = ember.poisson(ember.full((200_000,), 3.0, dtype=ember.float64))
    b = ember.binomial(ember.full((200_000,), 10.0), ember.full((200_000,), 0.3))
    assert p.dtype == ember.float64 and b.dtype == ember.float32
    assert abs(p.mean().item() - 3) < 0.02 and abs(p.var().item() - 3) < 0.05
    assert abs(b.mean().item() - 3) < 0.02 and abs(b.var().item() - 2.1) < 0.04
    assert ember.binomial(ember.tensor([7.0, 0.0]), ember.tensor([1.0, 0.5])).tolist() == [7, 0]
    g = ember.Generator().manual_seed(5)
    first = ember.poisson(ember.full((8,), 4.0), generator=g)
    g.manual_seed(5)
    assert ember.equal(first, ember.poisson(ember.full((8,), 4.0), generator=g))


def test_poisson_gradient_is_zero_and_binomials_is_refused_as_torch():
    for m in (torch, ember):
        rate = m.full((3,), 2.0, dtype=m.float64, requires_grad=True)
        m.poisson(rate).sum().backward()
        assert rate.grad.tolist() == [0.0] * 3
        count = m.full((2,), 4.0, requires_grad=True)
        y = m.binomial(count, m.full((2,), 0.5))
        assert y.requires_grad
        with pytest.raises(Exception, match="derivative for .*binomial.* is not implemented"):
            y.sum().backward()


def test_normal_tensor_arguments_get_zero_gradient_as_torch():
    for m in (torch, ember):
        mean = m.ones(3, dtype=m.float64, requires_grad=True)
        std = m.ones(3, dtype=m.float64, requires_grad=True)
        y = m.normal(mean, std)
        assert y.grad_fn is not None
        y.sum().backward()
        assert mean.grad.tolist() == [0.0] * 3 and std.grad.tolist() == [0.0] * 3


def test_randint_dtype_bounds_and_generator_reproducible():
    g1, g2 = ember.Generator().manual_seed(3), ember.Generator().manual_seed(3)
    a = ember.randint(2, 10, (50,), generator=g1)
    assert ember.equal(a, ember.randint(2, 10, (50,), generator=g2))
    assert 2 <= a.min().item() and a.max().item() <= 9
    u = ember.randint(0, 256, (2000,), dtype=ember.uint8)
    assert u.dtype == ember.uint8 and u.max().item() > 200


def test_random_creators_take_bfloat16_as_torch():
    for m in (torch, ember):
        bf = m.bfloat16
        assert m.rand(2, dtype=bf).dtype == bf and m.randn(2, dtype=bf).dtype == bf
        assert m.rand_like(m.ones(2, dtype=bf)).dtype == bf
        assert m.bernoulli(m.ones(2, dtype=bf) * 0.5).dtype == bf
        assert m.multinomial(m.ones(2, 3, dtype=bf), 2).dtype == m.int64


def test_rand_complex_draws_each_part_uniform_as_torch():
    z = ember.rand(4000, dtype=ember.complex64, generator=ember.Generator().manual_seed(0))
    assert z.dtype == ember.complex64
    for part in (z.real.numpy(), z.imag.numpy()):
        assert 0 <= part.min() and part.max() < 1 and abs(part.mean() - 0.5) < 0.05


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_size_keyword_as_torch(name):
    for kw in ({"size": (2, 3)}, {"size": [4]}, {"size": ()}):
        e, t = getattr(ember, name)(**kw), getattr(torch, name)(**kw)
        assert tuple(e.shape) == tuple(t.shape) and e.dtype == ember.float32
    assert getattr(ember, name)(size=(2,), dtype=ember.float64).dtype == ember.float64
    with pytest.raises(EmberError, match=f"{name}\\(\\) got multiple values for argument 'size'"):
        getattr(ember, name)(2, size=(2,))
    with pytest.raises(TypeError):
        getattr(torch, name)(2, size=(2,))


def test_factories():
    assert ember.logspace(0, 1.9, 3, dtype=ember.int64).tolist() == \
        torch.logspace(0, 1.9, 3, dtype=torch.int64).tolist()
    np.testing.assert_allclose(ember.logspace(-1, 2, 4, base=2.0).numpy(),
                               torch.logspace(-1, 2, 4, base=2.0).numpy())
    assert ember.logspace(ember.tensor(0), ember.tensor(2), 3).tolist() == [1.0, 10.0, 100.0]
    s = ember.scalar_tensor(3)
    assert s.shape == () and s.dtype == ember.float32 and s.item() == 3.0
    assert ember.empty_strided((2, 3), (3, 1), dtype=ember.float64).shape == (2, 3)
    assert ember.randn(2).new_empty_strided((4,), (1,)).dtype == ember.float32
    assert ember.empty_permuted((2, 3, 4), (0, 2, 1)).shape == (2, 3, 4)
    with pytest.raises(EmberError, match="strides"):
        ember.empty_strided((2, 3), (1,))
    with pytest.raises(EmberError, match="permutation"):
        ember.empty_permuted((2, 3), (0, 0))
    r = ember.randint_like(ember.zeros(50, 4), 3, 7)
    assert r.dtype == ember.float32 and 3 <= r.min().item() and r.max().item() < 7
    x = ember.randn(3, requires_grad=True)
    y = ember.fill(x, 2.5)
    assert y.tolist() == [2.5] * 3 and y.requires_grad


def test_random_fills():
    x = ember.empty(2000, dtype=ember.float64)
    ember.manual_seed(3)
    a = x.exponential_(2.0).clone()
    assert a.min().item() > 0 and abs(a.mean().item() - 0.5) < 0.05
    ember.manual_seed(3)
    assert x.exponential_(lambd=2.0).equal(a)  # seeded: reproducible
    g = x.geometric_(0.25)
    assert g is x and (g >= 1).all().item() and g.equal(g.round())
    assert abs(g.mean().item() - 4.0) < 0.4
    assert (x.log_normal_(0.0, 0.5) > 0).all().item()
    c = x.cauchy_(median=3.0, sigma=0.1)
    assert abs(c.median().item() - 3.0) < 0.05
    with pytest.raises(EmberError, match="p to be in"):
        x.geometric_(1.5)
    with pytest.raises(EmberError, match="floating point"):
        ember.zeros(3, dtype=ember.int64).exponential_()


def test_uniform_and_normal_take_zero_dim_tensors_as_torch():
    """A 0-dim tensor not requiring grad is a float argument to uniform_ / normal_ (torch's
    parser; torchvision's RandomResizedCrop draws ``uniform_(log_ratio[0], log_ratio[1])``);
    a tensor of more elements or requiring grad is a TypeError naming the argument."""
    for m in (ember, torch):
        lo, hi = m.tensor(2.0), m.tensor(3, dtype=m.int64)
        m.manual_seed(0)
        x = m.empty(500, dtype=m.float64).uniform_(lo, hi)
        assert 2.0 <= x.min().item() and x.max().item() <= 3.0
        y = m.empty(500, dtype=m.float64).normal_(m.tensor(5.0), m.tensor(0.1))
        assert abs(y.mean().item() - 5.0) < 0.05
        with pytest.raises(TypeError, match="argument 'from' .* must be float, not Tensor"):
            m.empty(2).uniform_(m.tensor([0.0]), 1.0)
        with pytest.raises(TypeError, match="argument 'std' .* must be float, not Tensor"):
            m.empty(2).normal_(0.0, m.tensor(1.0, requires_grad=True))
    ember.manual_seed(1)
    a = ember.empty(4).uniform_(ember.tensor(-1.0), ember.tensor(1.0))
    ember.manual_seed(1)
    assert a.equal(ember.empty(4).uniform_(-1.0, 1.0))


def test_integer_arange_and_linspace_match_torch():
    torch = pytest.importorskip("torch")
    cases = [(-8.000001, -4.0), (-8.000001, -4.0, 1.5), (0.5, 5.7, 1.3), (5, 0, -2),
             (-1.1, 4.0, 0.6)]
    for args in cases:
        for tdt, edt in ((torch.int64, ember.int64), (torch.int32, ember.int32)):
            try:
                ref = torch.arange(*args, dtype=tdt).tolist()
            except (RuntimeError, ValueError):
                with pytest.raises(RuntimeError, match="step must be nonzero"):
                    ember.arange(*args, dtype=edt)
                continue
            assert ember.arange(*args, dtype=edt).tolist() == ref, (args, edt)
    for start, end, steps in ((-5, 3, 7), (10.0, -6.0, 7), (-3.2, 7.0, 7), (0, 100, 9),
                              (2.7, 2.7, 1), (1, 5, 0)):
        ref = torch.linspace(start, end, steps, dtype=torch.int64).tolist()
        assert ember.linspace(start, end, steps, dtype=ember.int64).tolist() == ref


def test_square_of_bool_zero_function_and_normal_layout():
    s = ember.square(ember.tensor([True, False]))
    assert s.dtype == ember.int64 and s.tolist() == [1, 0]
    z = ember.ones(3)
    assert ember.zero_(z) is z and z.tolist() == [0.0, 0.0, 0.0]
    assert ember.normal(0.0, 1.0, (2, 3), layout=ember.strided).shape == (2, 3)
    with pytest.raises(TypeError):
        ember.normal(0.0, 1.0, (2,), layout="sparse")


def test_the_legacy_new_constructor_reads_its_arguments_as_torch():
    for L in (torch, ember):
        x = L.zeros(2, 3, dtype=L.float64)
        got = [tuple(x.new().shape), tuple(x.new(4, 5).shape), tuple(x.new(x.shape).shape),
               x.new((2, 7)).tolist(), x.new([1, 2]).tolist(), tuple(x.new(3).shape),
               str(x.new([1]).dtype).split(".")[1]]
        if L is torch:
            want = got
    assert got == want
    with pytest.raises(EmberError, match="new"):
        ember.zeros(2).new(2, [3])


@pytest.mark.parametrize("dtype,args,low,high", [
    ("float32", (), 0, 2 ** 24), ("float16", (), 0, 2 ** 11), ("float64", (5,), 0, 4),
    ("float32", (-3, 2), -3, 1), ("int8", (), 0, 127), ("uint8", (), 0, 255),
    ("int64", (-5, None), -5, 2 ** 63 - 2), ("bool", (), 0, 1), ("int32", (2, 9), 2, 8)])
def test_random_fills_in_place_within_torchs_ranges(dtype, args, low, high):
    t = ember.zeros(4000, dtype=getattr(ember, dtype))
    assert t.random_(*args) is t
    a = t.numpy().astype(np.float64)
    assert a.min() >= low and a.max() <= high and (a == np.round(a)).all()
    assert len(np.unique(a)) > 1
    ref = torch.zeros(4000, dtype=getattr(torch, dtype)).random_(*args).numpy()
    assert ref.min() >= low and ref.max() <= high     # torch's range is the same
    with pytest.raises(EmberError, match="from"):
        ember.zeros(3).random_(4, 2)


def test_tensor_of_a_tensor_warns_as_torch_at_the_callers_line():
    import warnings
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m.tensor(m.ones(2))
            m.tensor([1.0, 2.0])
        assert len(seen) == 1 and "sourceTensor.detach().clone()" in str(seen[0].message)
        assert seen[0].filename == __file__


def test_numpy_scalars_in_a_list_promote_with_python_numbers_as_torch():
    """``torch.tensor([np.float32(x), 0.5])``: a NumPy scalar keeps its dtype and a Python
    float is the default dtype, promoted as torch (NumPy's own inference gave float64)."""
    cases = [[np.float32(1), 2.5], [np.float32(1), np.float32(2), 3], [np.float16(1), 2.5],
             [np.int32(3), 2.5], [np.int8(1), np.uint8(2)], [np.int32(1), 2],
             [np.float64(1), np.float32(2)], [[np.float16(1), 2.5], [3, 4]],
             [np.uint8(200), 1.5], [np.array([1, 2], np.int32), [3, 4]]]
    for default in (torch.float32, torch.float64):
        torch.set_default_dtype(default)
        ember.set_default_dtype(getattr(ember, str(default).split(".")[1]))
        try:
            for data in cases:
                ours, theirs = ember.tensor(data), torch.tensor(data)
                assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], data
                assert ours.tolist() == theirs.tolist()
        finally:
            torch.set_default_dtype(torch.float32)
            ember.set_default_dtype(ember.float32)


_FACTORIES = {
    "zeros": lambda L, **k: L.zeros(2, 3, **k), "ones": lambda L, **k: L.ones(2, **k),
    "empty": lambda L, **k: L.empty(2, **k), "full": lambda L, **k: L.full((2,), 1.0, **k),
    "arange": lambda L, **k: L.arange(3, **k), "linspace": lambda L, **k: L.linspace(0, 1, 3, **k),
    "logspace": lambda L, **k: L.logspace(0, 1, 3, **k), "eye": lambda L, **k: L.eye(2, **k),
    "rand": lambda L, **k: L.rand(2, **k), "randn": lambda L, **k: L.randn(2, **k),
    "randint": lambda L, **k: L.randint(0, 3, (2,), **k),
    "randperm": lambda L, **k: L.randperm(3, **k),
    "normal": lambda L, **k: L.normal(0.0, 1.0, (2,), **k),
    "zeros_like": lambda L, **k: L.zeros_like(L.ones(2), **k),
    "full_like": lambda L, **k: L.full_like(L.ones(2), 2, **k),
    "rand_like": lambda L, **k: L.rand_like(L.ones(2), **k),
    "randint_like": lambda L, **k: L.randint_like(L.ones(2), 3, **k),
    "empty_strided": lambda L, **k: L.empty_strided((2,), (1,), **k),
    "new_ones": lambda L, **k: L.ones(2).new_ones(3, **k),
    "new_full": lambda L, **k: L.ones(2).new_full((2,), 1.0, **k),
}


@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_factories_take_torchs_layout_and_pin_memory(name):
    """``layout=torch.strided`` and ``pin_memory=False`` are accepted as by torch (programs
    pass them); ``pin_memory=True`` raises torch's RuntimeError of a CPU-only build, and a
    layout that is not a layout torch's TypeError."""
    f = _FACTORIES[name]
    assert tuple(f(ember, layout=ember.strided, pin_memory=False).shape) == \
        tuple(f(torch, layout=torch.strided, pin_memory=False).shape)
    for L in (torch, ember):
        with pytest.raises(RuntimeError, match="pin_memory=True requires a CUDA or other "
                                               "accelerator backend"):
            f(L, pin_memory=True)
        with pytest.raises(TypeError, match="layout"):
            f(L, layout="strided")
    with pytest.raises(NotImplementedError, match="layout=ember.sparse_coo is not supported"):
        f(ember, layout=ember.sparse_coo)


def test_tensor_takes_pin_memory_and_range_layout_only_as_torch():
    for L in (torch, ember):
        assert L.tensor([1.0], pin_memory=False).tolist() == [1.0]
        with pytest.raises(RuntimeError, match="pin_memory=True"):
            L.tensor([1.0], pin_memory=True)
        with pytest.raises(TypeError, match="layout"):
            L.tensor([1.0], layout=L.strided)
