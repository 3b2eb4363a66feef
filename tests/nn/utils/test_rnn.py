"""PackedSequence and the packing utilities against torch.nn.utils.rnn; RNN, LSTM and GRU on
packed input (each sequence runs for its own length, the reverse direction from its own last
step), forward and backward, with weights copied by state_dict key."""
import numpy as np
import pytest

import ember
from ember.nn.utils import rnn as R

torch = pytest.importorskip("torch")
TR = torch.nn.utils.rnn

LENGTHS = [3, 5, 1, 4]          # unsorted: exercises sorted_indices / unsorted_indices


def _padded(T=5, B=4, F=3, seed=0):
    return np.random.default_rng(seed).standard_normal((T, B, F))


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_pad_round_trip_matches_torch(batch_first):
    x = _padded()
    if batch_first:
        x = x.transpose(1, 0, 2).copy()
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    pe = R.pack_padded_sequence(xe, LENGTHS, batch_first=batch_first, enforce_sorted=False)
    pt = TR.pack_padded_sequence(xt, LENGTHS, batch_first=batch_first, enforce_sorted=False)
    np.testing.assert_array_equal(pe.data.detach().numpy(), pt.data.detach().numpy())
    for a, b in [(pe.batch_sizes, pt.batch_sizes), (pe.sorted_indices, pt.sorted_indices),
                 (pe.unsorted_indices, pt.unsorted_indices)]:
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    (ye, le), (yt, lt) = (R.pad_packed_sequence(pe, batch_first, -1.0, 7),
                          TR.pad_packed_sequence(pt, batch_first, -1.0, 7))
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(le.numpy(), lt.numpy())
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_pack_sequence_and_unpack_sequence():
    seqs = [np.random.default_rng(i).standard_normal((n, 2)) for i, n in enumerate(LENGTHS)]
    pe = R.pack_sequence([ember.tensor(s) for s in seqs], enforce_sorted=False)
    pt = TR.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(pe.data.numpy(), pt.data.numpy())
    for a, s in zip(R.unpack_sequence(pe), seqs):
        np.testing.assert_array_equal(a.numpy(), s)
    for a, s in zip(R.unpad_sequence(ember.tensor(_padded()), ember.tensor(LENGTHS)),
                    TR.unpad_sequence(torch.tensor(_padded()), torch.tensor(LENGTHS))):
        np.testing.assert_array_equal(a.numpy(), s.numpy())


def test_packing_errors_say_what_is_wrong():
    x = ember.tensor(_padded())
    with pytest.raises(ember.EmberError, match="sorted in decreasing order"):
        R.pack_padded_sequence(x, LENGTHS)
    with pytest.raises(ember.EmberError, match="4 lengths for a batch of 3"):
        R.pack_padded_sequence(x[:, :3], LENGTHS)
    with pytest.raises(ember.EmberError, match=r"1\.\.5"):
        R.pack_padded_sequence(x, [6, 5, 1, 4], enforce_sorted=False)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_modules_on_packed_input_match_torch(mode, bidirectional):
    torch.manual_seed(0)
    tm = getattr(torch.nn, mode)(3, 4, num_layers=2, bidirectional=bidirectional).double()
    em = getattr(ember.nn, mode)(3, 4, num_layers=2, bidirectional=bidirectional).double()
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = _padded(seed=2)
    D = 2 if bidirectional else 1
    h0 = np.random.default_rng(3).standard_normal((2 * D, 4, 4))
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    he, ht = ember.tensor(h0, requires_grad=True), torch.tensor(h0, requires_grad=True)
    hx_e, hx_t = ((he, he * 0.5), (ht, ht * 0.5)) if mode == "LSTM" else (he, ht)
    oe, se = em(R.pack_padded_sequence(xe, LENGTHS, enforce_sorted=False), hx_e)
    ot, st = tm(TR.pack_padded_sequence(xt, LENGTHS, enforce_sorted=False), hx_t)
    assert isinstance(oe, R.PackedSequence)
    ye, _ = R.pad_packed_sequence(oe)
    yt, _ = TR.pad_packed_sequence(ot)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    se, st = (se if mode == "LSTM" else (se,)), (st if mode == "LSTM" else (st,))
    for a, b in zip(se, st):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    loss_e = (ye * ye).sum() + sum((s * s * 0.3).sum() for s in se)
    loss_t = (yt * yt).sum() + sum((s * s * 0.3).sum() for s in st)
    loss_e.backward()
    loss_t.backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(he.grad.numpy(), ht.grad.numpy(), rtol=1e-9, atol=1e-11)
    pt = dict(tm.named_parameters())
    for k, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), pt[k].grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=k)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_proj_size_matches_torch(packed, bidirectional):
    torch.manual_seed(1)
    kw = dict(num_layers=2, bidirectional=bidirectional, proj_size=2)
    tm = torch.nn.LSTM(3, 4, **kw).double()
    em = ember.nn.LSTM(3, 4, **kw).double()
    assert [k for k, _ in em.named_parameters()] == [k for k, _ in tm.named_parameters()]
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert repr(em) == repr(tm)
    x = _padded(seed=4)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    if packed:
        xe = R.pack_padded_sequence(xe, LENGTHS, enforce_sorted=False)
        xt_in = TR.pack_padded_sequence(xt, LENGTHS, enforce_sorted=False)
    oe, (he, ce) = em(xe)
    ot, (ht, ct) = tm(xt_in if packed else xt)
    if packed:
        oe, ot = R.pad_packed_sequence(oe)[0], TR.pad_packed_sequence(ot)[0]
    for a, b in [(oe, ot), (he, ht), (ce, ct)]:
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    ((oe * oe).sum() + (ce * he.sum()).sum()).backward()
    ((ot * ot).sum() + (ct * ht.sum()).sum()).backward()
    pt = dict(tm.named_parameters())
    for k, p in em.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), pt[k].grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=k)


def test_proj_size_errors_as_torch():
    with pytest.raises(ember.EmberError, match="only supported for LSTM"):
        ember.nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ember.EmberError, match="smaller than hidden_size"):
        ember.nn.LSTM(3, 4, proj_size=4)


def test_projected_lstm_exports_to_onnx():
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import io
    m = ember.nn.LSTM(3, 4, proj_size=2, batch_first=True)
    x = ember.randn(2, 5, 3)
    f = io.BytesIO()
    ember.onnx.export(m, (x,), f)
    sess = ort.InferenceSession(f.getvalue())
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    out, (h, c) = m(x)
    np.testing.assert_allclose(got[0], out.detach().numpy(), rtol=1e-5, atol=1e-6)
