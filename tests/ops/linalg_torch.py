"""torch references for ember.linalg's decompositions with ember's sign convention (each column of
U / of the eigenvectors has its largest-magnitude entry positive; v_i flips with u_i)."""


def _signs(torch, x):
    idx = x.detach().abs().argmax(-2, keepdim=True)
    s = x.detach().gather(-2, idx).sign()
    return torch.where(s == 0, torch.ones_like(s), s)


def svd(a, full_matrices=True):
    import torch
    U, S, Vh = torch.linalg.svd(a, full_matrices=full_matrices)
    k = S.shape[-1]
    su = _signs(torch, U)
    sv = _signs(torch, Vh.mT).mT.clone()
    sv[..., :k, :] = su[..., :, :k].mT
    return U * su, S, Vh * sv


def eigh(a, UPLO="L"):
    import torch
    L, V = torch.linalg.eigh(a, UPLO=UPLO)
    return L, V * _signs(torch, V)
