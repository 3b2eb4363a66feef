"""Text ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch and TfIdfVectorizer.

ember has no string tensor. A STRING value of an ONNX graph is a NumPy object array of ``str``
that lives only inside the importer: these importers (and Equal, LabelEncoder) are registered
with ``strings=True``, and the loader rejects, when the model is loaded, any other node that
reads or writes a STRING tensor. String results carry no gradient; the numeric ones they make
(Equal, RegexFullMatch, StringSplit's lengths, TfIdfVectorizer) are ember tensors.
"""
import re

import numpy as np

import ember
from ember.errors import EmberRuntimeError
from ember.onnx.importer.registry import importer


def _str_array(x, op):
    if not isinstance(x, np.ndarray):
        raise EmberRuntimeError(f"{op}: expects a STRING tensor (a NumPy array of str), got "
                                f"{type(x).__name__}")
    return x.astype(object)


def _strs(v):
    return [s.decode() if isinstance(s, bytes) else str(s) for s in (v or [])]


@importer("StringNormalizer", since=10, strings=True,
          attrs={"case_change_action": "NONE", "is_case_sensitive": 0, "locale": "",
                 "stopwords": None},
          check=lambda a, n: None if a["case_change_action"] in ("NONE", "LOWER", "UPPER")
          else ("case_change_action", "must be NONE, LOWER or UPPER"))
def string_normalizer(a, x):
    """Drop the elements equal to a stopword (ignoring case unless is_case_sensitive), then
    change case; a [C] or [1, C] input; all dropped gives one empty string."""
    x = _str_array(x, "StringNormalizer")
    if x.ndim not in (1, 2) or x.ndim == 2 and x.shape[0] != 1:
        raise EmberRuntimeError(f"StringNormalizer: expects shape [C] or [1, C], got "
                                f"{list(x.shape)}")
    stops = _strs(a["stopwords"])
    if a["is_case_sensitive"]:
        keep = [s for s in x.reshape(-1).tolist() if s not in set(stops)]
    else:
        low = {w.lower() for w in stops}
        keep = [s for s in x.reshape(-1).tolist() if s.lower() not in low]
    act = a["case_change_action"]
    keep = [s.lower() if act == "LOWER" else s.upper() if act == "UPPER" else s for s in keep]
    if not keep:
        keep = [""]
    out = np.array(keep, dtype=object)
    return out.reshape(1, -1) if x.ndim == 2 else out


@importer("StringConcat", since=20, strings=True)
def string_concat(a, x, y):
    x, y = _str_array(x, "StringConcat"), _str_array(y, "StringConcat")
    out = np.frompyfunc(lambda p, q: p + q, 2, 1)(x, y)
    return np.asarray(out, dtype=object).reshape(np.broadcast_shapes(x.shape, y.shape))


@importer("StringSplit", since=20, strings=True, max_outputs=2,
          attrs={"delimiter": "", "maxsplit": None})
def string_split(a, x):
    """Each string split at ``delimiter`` (runs of whitespace when empty, as str.split), at most
    ``maxsplit`` times; the pieces padded with "" to the longest, and their counts."""
    x = _str_array(x, "StringSplit")
    sep = a["delimiter"] or None
    ms = -1 if a["maxsplit"] is None else int(a["maxsplit"])
    parts = [s.split(sep, ms) for s in x.reshape(-1).tolist()]
    n = max((len(p) for p in parts), default=0)
    out = np.array([p + [""] * (n - len(p)) for p in parts], dtype=object).reshape(
        *x.shape, n)
    lengths = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    return out, ember.tensor(lengths)


def _check_regex(a, n):
    try:
        re.compile(a["pattern"])
    except re.error as e:
        return ("pattern", f"is not a valid regular expression ({e})")
    return None


@importer("RegexFullMatch", since=20, strings=True, attrs={"pattern": ""}, check=_check_regex)
def regex_full_match(a, x):
    """Whether each string matches ``pattern`` whole (Python's re, which reads the RE2 syntax
    ONNX names, as ONNX's reference does)."""
    x = _str_array(x, "RegexFullMatch")
    rx = re.compile(a["pattern"])
    hits = [rx.fullmatch(s) is not None for s in x.reshape(-1).tolist()]
    return ember.tensor(np.array(hits, dtype=bool).reshape(x.shape))


def _check_tfidf(a, n):
    if a["mode"] not in ("TF", "IDF", "TFIDF"):
        return ("mode", "must be TF, IDF or TFIDF")
    if not a["ngram_counts"] or not a["ngram_indexes"]:
        return ("ngram_counts", "and ngram_indexes are required")
    if a["pool_int64s"] is None and a["pool_strings"] is None:
        return ("pool_int64s", "or pool_strings is required")
    if not 1 <= a["min_gram_length"] <= a["max_gram_length"]:
        return ("min_gram_length", "must be at least 1 and at most max_gram_length")
    return None


def _tfidf_table(a):
    """{n-gram tuple: output index} for the n-gram lengths in [min, max]: the pool holds the
    1-grams from ngram_counts[0], the 2-grams from ngram_counts[1]...; the j-th n-gram of the
    pool (over all lengths) counts into column ngram_indexes[j]."""
    pool = a["pool_int64s"] if a["pool_int64s"] is not None else _strs(a["pool_strings"])
    pool = list(pool)
    counts, idx = list(a["ngram_counts"]), list(a["ngram_indexes"])
    table, j = {}, 0
    for i, start in enumerate(counts):
        n = i + 1
        end = counts[i + 1] if i + 1 < len(counts) else len(pool)
        for g in range((end - start) // n):
            if a["min_gram_length"] <= n <= a["max_gram_length"] and j < len(idx):
                table.setdefault(tuple(pool[start + g * n: start + (g + 1) * n]), idx[j])
            j += 1
    return table


@importer("TfIdfVectorizer", since=9, strings=True, check=_check_tfidf,
          attrs={"max_gram_length": 1, "max_skip_count": 0, "min_gram_length": 1, "mode": "TF",
                 "ngram_counts": None, "ngram_indexes": None, "pool_int64s": None,
                 "pool_strings": None, "weights": None})
def tfidf_vectorizer(a, x):
    """Counts of the pool's n-grams (with up to max_skip_count skipped items between their
    elements; 1-grams counted once) in each row of a [C] or [B, C] input, weighted by mode."""
    arr = x if isinstance(x, np.ndarray) else x.detach().numpy()
    if arr.ndim > 2:
        raise EmberRuntimeError(f"TfIdfVectorizer: expects shape [C] or [B, C], got "
                                f"{list(arr.shape)}")
    rows = arr.reshape(1, -1) if arr.ndim < 2 else arr
    rows = [[str(v) if arr.dtype == object else int(v) for v in r] for r in rows.tolist()] \
        if rows.size else [[] for _ in range(rows.shape[0])]
    table = _tfidf_table(a)
    size = max(a["ngram_indexes"]) + 1
    freq = np.zeros((len(rows), size), dtype=np.float64)
    lo, hi, skips = a["min_gram_length"], a["max_gram_length"], a["max_skip_count"]
    for r, row in enumerate(rows):
        for n in range(lo, hi + 1):
            for d in (range(1, skips + 2) if n > 1 else (1,)):
                for s in range(len(row) - (n - 1) * d):
                    k = table.get(tuple(row[s + m * d] for m in range(n)))
                    if k is not None:
                        freq[r, k] += 1
    w = np.asarray(a["weights"], dtype=np.float64) if a["weights"] else None
    if a["mode"] == "IDF":
        y = (freq > 0) * (w if w is not None else 1.0)
    elif a["mode"] == "TFIDF":
        y = freq * w if w is not None else freq
    else:
        y = freq
    y = y.astype(np.float32)
    return ember.tensor(y.reshape(-1) if arr.ndim < 2 else y)

