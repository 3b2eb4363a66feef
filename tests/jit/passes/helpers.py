"""Helpers of the pass tests."""


def kinds(g):
    """The node kinds of graph ``g``, in order."""
    return [n.kind for n in g.nodes]
