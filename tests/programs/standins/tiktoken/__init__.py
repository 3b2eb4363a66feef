"""A stand-in for ``tiktoken`` that never touches the network. nanoGPT's sample.py imports
tiktoken at the top but uses it only when the dataset folder has no meta.pkl (a character-level
dataset has one); the real ``get_encoding("gpt2")`` downloads its BPE ranks on first use, which
the tests cannot do, so here every encoding raises a ConnectionError that says so."""

__version__ = "0.0-standin"


def get_encoding(encoding_name):
    raise ConnectionError(f"tiktoken stand-in: no network; the {encoding_name!r} BPE ranks are a "
                          "download (give the program a dataset with a meta.pkl instead)")


def encoding_for_model(model_name):
    raise ConnectionError(f"tiktoken stand-in: no network; the encoding of {model_name!r} is a "
                          "download")
