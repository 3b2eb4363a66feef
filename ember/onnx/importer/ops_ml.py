"""Ops of the ``ai.onnx.ml`` domain: ArrayFeatureExtractor, Binarizer, LabelEncoder,
TreeEnsemble."""
import numpy as np

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.importer._util import ints
from ember.onnx.importer.registry import importer

ML = "ai.onnx.ml"


@importer("ArrayFeatureExtractor", since=1, domain=ML)
def array_feature_extractor(a, x, idx):
    """``x[..., idx]`` over the last axis (a 1-d input is one row, as ONNX's reference)."""
    index = ints(idx)
    y = ember.index_select(x, x.dim() - 1, ember.tensor(np.array(index, dtype=np.int64)))
    return y.reshape(1, len(index)) if x.dim() == 1 else y


@importer("Binarizer", since=1, domain=ML, attrs={"threshold": 0.0})
def binarizer(a, x):
    return (x > a["threshold"]).to(x.dtype)


def _strs(v):
    return [s.decode() if isinstance(s, bytes) else str(s) for s in v]


def _le_table(a):
    """(keys, values, default, output NumPy dtype) of a LabelEncoder node."""
    keys = next((a[k] for k in ("keys_floats", "keys_int64s", "keys_strings", "keys_tensor")
                 if a[k] is not None), None)
    vals, kind = next(((a[k], k) for k in ("values_floats", "values_int64s", "values_strings",
                                           "values_tensor") if a[k] is not None), (None, None))
    if keys is None or vals is None:
        raise EmberRuntimeError("LabelEncoder: needs one keys_* and one values_* attribute")
    keys = np.asarray(keys).reshape(-1)
    vals = np.asarray(vals).reshape(-1)
    if keys.dtype.kind in "OSU":
        keys = np.array(_strs(keys), dtype=object)
    if kind == "values_tensor":
        odt = vals.dtype if vals.dtype.kind not in "OSU" else np.dtype(object)
        d = a["default_tensor"]
        default = (np.asarray(d).reshape(-1)[0] if d is not None else
                   {"f": -0.0, "i": -1}.get(odt.kind, "_Unused"))
    elif kind == "values_floats":
        odt, default = np.dtype(np.float32), a["default_float"]
    elif kind == "values_int64s":
        odt, default = np.dtype(np.int64), a["default_int64"]
    else:
        odt, default = np.dtype(object), a["default_string"]
    if odt == object:
        vals = np.array(_strs(vals), dtype=object)
        default = default.decode() if isinstance(default, bytes) else str(default)
    if len(keys) != len(vals):
        raise EmberRuntimeError(f"LabelEncoder: {len(keys)} keys but {len(vals)} values")
    return keys, vals, default, odt


def _check_le(a, n):
    try:
        _le_table(a)
    except EmberRuntimeError as e:
        return (None, str(e))
    return None


_LE_ATTRS = {k: None for k in ("keys_floats", "keys_int64s", "keys_strings", "keys_tensor",
                               "values_floats", "values_int64s", "values_strings",
                               "values_tensor", "default_tensor")}
_LE_ATTRS.update(default_float=-0.0, default_int64=-1, default_string="_Unused")


@importer("LabelEncoder", since=2, domain=ML, attrs=_LE_ATTRS, check=_check_le, strings=True)
def label_encoder(a, x):
    """A lookup table: each element of ``x`` found among the keys becomes its value, others the
    default. Strings are NumPy object arrays (ops_text)."""
    keys, vals, default, odt = _le_table(a)
    arr = x if isinstance(x, np.ndarray) else x.detach().numpy()
    if keys.dtype == object:
        table = dict(zip(keys.tolist(), vals.tolist()))
        flat = [table.get(str(v), default) for v in arr.reshape(-1).tolist()]
    else:
        keys = keys.astype(np.float64)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        v = arr.reshape(-1).astype(np.float64)
        pos = np.clip(np.searchsorted(sk, v), 0, max(len(sk) - 1, 0))
        hit = (sk[pos] == v) | (np.isnan(sk[pos]) & np.isnan(v)) if len(sk) else \
            np.zeros(v.shape, bool)
        flat = [vals[order[p]] if h else default for p, h in zip(pos.tolist(), hit.tolist())]
    out = np.array(flat, dtype=odt).reshape(arr.shape)
    return out if odt == object else ember.tensor(out)


# ---- TreeEnsemble (ai.onnx.ml opset 5) --------------------------------------------------

_MODES = {0: "BRANCH_LEQ", 1: "BRANCH_LT", 2: "BRANCH_GTE", 3: "BRANCH_GT", 4: "BRANCH_EQ",
          5: "BRANCH_NEQ", 6: "BRANCH_MEMBER"}

_TE_ATTRS = {"aggregate_function": 1, "leaf_targetids": None, "leaf_weights": None,
             "membership_values": None, "n_targets": None, "nodes_falseleafs": None,
             "nodes_falsenodeids": None, "nodes_featureids": None,
             "nodes_hitrates": None, "nodes_missing_value_tracks_true": None,
             "nodes_modes": None, "nodes_splits": None, "nodes_trueleafs": None,
             "nodes_truenodeids": None, "post_transform": 0, "tree_roots": None}


def _check_te(a, n):
    for k in ("leaf_targetids", "leaf_weights", "nodes_falseleafs", "nodes_falsenodeids",
              "nodes_featureids", "nodes_modes", "nodes_splits", "nodes_trueleafs",
              "nodes_truenodeids", "tree_roots", "n_targets"):
        if a[k] is None:
            return (k, "is required")
    if a["aggregate_function"] not in (0, 1, 2, 3):
        return ("aggregate_function", "must be 0 (AVERAGE), 1 (SUM), 2 (MIN) or 3 (MAX)")
    if a["post_transform"] != 0:
        return ("post_transform", "other than 0 (NONE) is not supported")
    return None


@importer("TreeEnsemble", since=5, domain=ML, attrs=_TE_ATTRS, check=_check_te)
def tree_ensemble(a, x):
    """Every row walks every tree from its root to a leaf; leaf weights are summed (or averaged,
    min, max) per target. Missing values (NaN) go the way nodes_missing_value_tracks_true says.
    Evaluated in NumPy (no gradient: a tree's output is piecewise constant)."""
    X = x.detach().numpy()
    X = X.reshape(X.shape[0], -1) if X.ndim > 1 else X.reshape(1, -1)
    modes = np.asarray(a["nodes_modes"]).reshape(-1).astype(np.int64)
    splits = np.asarray(a["nodes_splits"]).reshape(-1).astype(np.float64)
    feat = a["nodes_featureids"]
    tn, fn = a["nodes_truenodeids"], a["nodes_falsenodeids"]
    tl, fl = a["nodes_trueleafs"], a["nodes_falseleafs"]
    miss = a["nodes_missing_value_tracks_true"] or [0] * len(feat)
    weights = np.asarray(a["leaf_weights"]).reshape(-1).astype(np.float64)
    targets = a["leaf_targetids"]
    # membership_values: the sets of the BRANCH_MEMBER nodes, NaN-separated, in the order the
    # trees are walked (roots in order, each depth first, true branch first)
    members, cur = [], []
    for v in np.asarray(a["membership_values"] if a["membership_values"] is not None else [],
                        dtype=np.float64).reshape(-1):
        if np.isnan(v):
            members.append(set(cur))
            cur = []
        else:
            cur.append(v)
    members.append(set(cur))
    member_of = {}

    def walk(i, leaf):
        if leaf:
            return
        if modes[i] == 6:
            member_of[i] = members[len(member_of)] if len(member_of) < len(members) else set()
        walk(tn[i], tl[i])
        walk(fn[i], fl[i])

    def root_is_leaf(r):
        return bool(tl[r] and fl[r] and tn[r] == fn[r])

    for root in a["tree_roots"]:
        walk(root, root_is_leaf(root))
    nt = int(a["n_targets"])
    agg = a["aggregate_function"]
    out = np.zeros((X.shape[0], nt))
    big = float(np.finfo(X.dtype).max) if X.dtype.kind == "f" else np.inf
    init = {0: 0.0, 1: 0.0, 2: big, 3: -big}[agg]
    cmp = {0: np.less_equal, 1: np.less, 2: np.greater_equal, 3: np.greater, 4: np.equal,
           5: np.not_equal}
    for r in range(X.shape[0]):
        acc = np.full(nt, init)
        for root in a["tree_roots"]:
            i, leaf = root, root_is_leaf(root)
            while not leaf:
                v = X[r, feat[i]]
                m = modes[i]
                go = (v in member_of[i]) if m == 6 else bool(cmp[m](v, splits[i]))
                go = go or bool(miss[i]) and bool(np.isnan(v))
                i, leaf = (tn[i], tl[i]) if go else (fn[i], fl[i])
            t, w = targets[i], weights[i]
            acc[t] = acc[t] + w if agg in (0, 1) else (min(acc[t], w) if agg == 2 else
                                                         max(acc[t], w))
        if agg == 0:
            acc = acc / len(a["tree_roots"])
        out[r] = acc
    return ember.tensor(out.astype(x.dtype.numpy))
