"""kl_divergence and register_kl (ember/distributions/kl.py) against torch: each registered pair's
value and gradients, infinite divergences, mixed and Independent pairs, a missing pair, and the
dispatch to the closest registered pair of a subclass."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions import transformed_cases
from tests.distributions.torch_cases import (KL_PAIRS, TD, check_kl_divergence_matches_torch,
                                             torch)


@pytest.mark.parametrize("case", KL_PAIRS)
def test_kl_divergence_matches_torch(case):
    check_kl_divergence_matches_torch(case)


@pytest.mark.parametrize("case", transformed_cases.KL_CASES)
def test_kl_divergence_of_transformed_families_matches_torch(case):
    """Pairs of the same transformed family (equal transforms), and Exponential."""
    transformed_cases.check_kl_divergence_matches_torch(case)


def test_kl_special_cases():
    # support of p outside q's: infinite, as torch
    p, q = ED.Uniform(0.0, 2.0), ED.Uniform(0.5, 3.0)
    assert float(ED.kl_divergence(p, q)) == float("inf")
    tp, tq = TD.Uniform(0.0, 2.0), TD.Uniform(0.5, 3.0)
    assert float(TD.kl_divergence(tp, tq)) == float("inf")
    # Uniform || Normal and Independent || Independent
    u = ED.Uniform(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 4.0]))
    nrm = ED.Normal(ember.tensor([0.3, 2.0]), ember.tensor([1.0, 0.5]))
    tu = TD.Uniform(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 4.0]))
    tn = TD.Normal(torch.tensor([0.3, 2.0]), torch.tensor([1.0, 0.5]))
    np.testing.assert_allclose(ED.kl_divergence(u, nrm).numpy(),
                               TD.kl_divergence(tu, tn).numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        float(ED.kl_divergence(ED.Independent(u, 1), ED.Independent(nrm, 1))),
        float(TD.kl_divergence(TD.Independent(tu, 1), TD.Independent(tn, 1))), rtol=1e-6)
    # Bernoulli with a zero probability: infinite where p puts mass q does not
    pe, qe = [0.5, 0.0], [0.0, 0.5]
    b1, b0 = ED.Bernoulli(probs=ember.tensor(pe)), ED.Bernoulli(probs=ember.tensor(qe))
    tb1, tb0 = TD.Bernoulli(probs=torch.tensor(pe)), TD.Bernoulli(probs=torch.tensor(qe))
    np.testing.assert_allclose(ED.kl_divergence(b1, b0).numpy(),
                               TD.kl_divergence(tb1, tb0).numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="No KL"):
        ED.kl_divergence(ED.Normal(0.0, 1.0), ED.Gamma(1.0, 1.0))

    class MyNormal(ED.Normal):
        pass

    @ED.register_kl(MyNormal, MyNormal)
    def _kl(p, q):
        return ember.tensor(42.0)
    assert float(ED.kl_divergence(MyNormal(0.0, 1.0), MyNormal(0.0, 1.0))) == 42.0
    # a subclass pair without its own entry uses the closest registered one
    assert float(ED.kl_divergence(MyNormal(0.0, 1.0), ED.Normal(0.0, 1.0))) == 0.0



# pairs with OneHotCategorical, the count families, Laplace and ContinuousBernoulli
def _leaf(lib, v, grad):
    return (ember.tensor if lib is ED else torch.tensor)(np.asarray(v, dtype=np.float64),
                                                         requires_grad=grad)


FAMILY_KL_PAIRS = {  # name -> (p family, p params, q family, q params)
    "OneHotCategorical": ("OneHotCategorical", dict(probs=[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]),
                          "OneHotCategorical", dict(logits=[[0.1, -1.0, 2.0], [0.0, 0.5, 0.3]])),
    "Poisson": ("Poisson", dict(rate=[0.5, 3.0, 7.0]), "Poisson", dict(rate=[1.0, 2.5, 9.0])),
    "Binomial": ("Binomial", dict(probs=[0.2, 0.5, 0.9], total_count=[4.0, 4.0, 6.0]),
                 "Binomial", dict(logits=[-1.0, 0.3, 1.0], total_count=[4.0, 3.0, 6.0])),
    "Geometric": ("Geometric", dict(probs=[0.1, 0.5, 0.8]), "Geometric",
                  dict(logits=[0.5, -0.2, 1.0])),
    "Laplace": ("Laplace", dict(loc=[0.0, 1.0, -2.0], scale=[1.0, 0.5, 2.0]), "Laplace",
                dict(loc=[0.5, 1.0, 1.0], scale=[2.0, 0.7, 1.0])),
    "Laplace-Normal": ("Laplace", dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), "Normal",
                       dict(loc=[0.5, -1.0], scale=[2.0, 0.7])),
    "Normal-Laplace": ("Normal", dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), "Laplace",
                       dict(loc=[0.5, -1.0], scale=[2.0, 0.7])),
    "ContinuousBernoulli": ("ContinuousBernoulli", dict(probs=[0.1, 0.4995, 0.8]),
                            "ContinuousBernoulli", dict(logits=[0.5, -1.0, 0.001])),
    "ContinuousBernoulli-Exponential": ("ContinuousBernoulli", dict(probs=[0.1, 0.8]),
                                        "Exponential", dict(rate=[0.5, 2.0])),
    "ContinuousBernoulli-Normal": ("ContinuousBernoulli", dict(probs=[0.1, 0.8]), "Normal",
                                   dict(loc=[0.5, -1.0], scale=[2.0, 0.7])),
    "ContinuousBernoulli-Uniform": ("ContinuousBernoulli", dict(probs=[0.1, 0.8]), "Uniform",
                                    dict(low=[-0.5, 0.1], high=[1.5, 2.0])),
    "Bernoulli-Poisson": ("Bernoulli", dict(probs=[0.1, 0.8]), "Poisson",
                          dict(rate=[0.5, 2.0])),
    "Poisson-Bernoulli": ("Poisson", dict(rate=[0.5, 2.0]), "Bernoulli",
                          dict(probs=[0.1, 0.8])),
    "Poisson-Binomial": ("Poisson", dict(rate=[0.5, 2.0]), "Binomial",
                         dict(probs=[0.1, 0.8], total_count=[3.0, 3.0])),
    "Laplace-Exponential": ("Laplace", dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), "Exponential",
                            dict(rate=[0.5, 2.0])),
    "Laplace-Uniform": ("Laplace", dict(loc=[0.0, 1.0], scale=[1.0, 0.5]), "Uniform",
                        dict(low=[0.0, 0.0], high=[1.0, 2.0])),
    "Normal-ContinuousBernoulli": ("Normal", dict(loc=[0.0, 1.0], scale=[1.0, 0.5]),
                                   "ContinuousBernoulli", dict(probs=[0.1, 0.8])),
    "Exponential-ContinuousBernoulli": ("Exponential", dict(rate=[0.5, 2.0]),
                                        "ContinuousBernoulli", dict(probs=[0.1, 0.8])),
}
_CONST = ("total_count",)


def _pair(lib, name, grad):
    fp, pp, fq, qp = FAMILY_KL_PAIRS[name]
    leaves = {k: _leaf(lib, v, grad and k not in _CONST) for k, v in pp.items()}
    p = getattr(lib, fp)(**leaves)
    q = getattr(lib, fq)(**{k: _leaf(lib, v, False) for k, v in qp.items()})
    return p, q, {k: v for k, v in leaves.items() if k not in _CONST}


@pytest.mark.parametrize("name", list(FAMILY_KL_PAIRS))
def test_kl_divergence_of_count_and_real_families_matches_torch(name):
    p, q, pe = _pair(ED, name, True)
    tp, tq, pt = _pair(TD, name, True)
    ke, kt = ED.kl_divergence(p, q), TD.kl_divergence(tp, tq)
    np.testing.assert_allclose(ke.detach().numpy(), kt.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    finite = np.isfinite(kt.detach().numpy())
    if not finite.any():
        return
    ember.where(ember.tensor(finite), ke, 0.0).sum().backward()
    torch.where(torch.tensor(finite), kt, 0.0).sum().backward()
    for k in pe:
        np.testing.assert_allclose(pe[k].grad.numpy(), pt[k].grad.numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=k)


def test_kl_binomial_with_a_larger_q_total_count_is_unsupported():
    p = ED.Binomial(ember.tensor([2.0]), ember.tensor([0.5]))
    q = ED.Binomial(ember.tensor([3.0]), ember.tensor([0.5]))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        ED.kl_divergence(p, q)


def test_kl_of_chi2_uses_gamma_gamma():
    p, q = ED.Chi2(_leaf(ED, [1.0, 4.0], False)), ED.Chi2(_leaf(ED, [2.0, 3.0], False))
    tp, tq = TD.Chi2(_leaf(TD, [1.0, 4.0], False)), TD.Chi2(_leaf(TD, [2.0, 3.0], False))
    np.testing.assert_allclose(ED.kl_divergence(p, q).numpy(),
                               TD.kl_divergence(tp, tq).numpy(), rtol=1e-10)
