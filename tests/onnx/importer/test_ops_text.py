"""The string importers (ember/onnx/importer/ops_text.py) against ONNX's reference evaluator:
StringNormalizer (case, stop words), StringConcat, StringSplit, RegexFullMatch and
TfIdfVectorizer counting n-grams."""
import numpy as np

from tests.onnx.importer.reference import helper, same_as_reference

S = np.array(["Hello", "the", "World", "THE"], dtype=object)


def test_string_normalizer():
    same_as_reference([helper.make_node("StringNormalizer", ["s"], ["y"],
                                        case_change_action="LOWER", stopwords=["the"])],
                      {"s": S}, ["y"])
    same_as_reference([helper.make_node("StringNormalizer", ["s"], ["y"],
                                        case_change_action="UPPER", is_case_sensitive=1,
                                        stopwords=["the"])], {"s": S}, ["y"])


def test_concat_split_and_regex():
    same_as_reference([helper.make_node("StringConcat", ["s", "t"], ["c"]),
                       helper.make_node("RegexFullMatch", ["s"], ["m"], pattern="[A-Z].*")],
                      {"s": S, "t": np.array(["!"], dtype=object)}, ["c", "m"])
    same_as_reference([helper.make_node("StringSplit", ["s"], ["parts", "n"], delimiter="-")],
                      {"s": np.array(["a-b-c", "d", "e-f"], dtype=object)}, ["parts", "n"])


def test_tfidf_vectorizer_counts():
    x = np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], np.int32)
    same_as_reference([helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TF",
                                        min_gram_length=1, max_gram_length=2, max_skip_count=0,
                                        ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                                        pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])],
                      {"x": x}, ["y"])
