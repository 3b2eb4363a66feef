"""Convolution engine settings, read by ``ember.kernels.conv.selector`` at every call.

``benchmark``: when True, the first call for a (shape, dtype, direction) times every algorithm that
can handle it and remembers the fastest for the rest of the process.
``algorithm``: None (the heuristic or autotuner chooses) or one of ``ALGORITHMS`` to force it; a
forced algorithm that cannot handle a shape raises ValueError naming both.
"""
ALGORITHMS = ("im2col", "implicit_gemm", "winograd", "fft", "direct1x1", "depthwise", "direct",
              "winograd2x2", "thin", "space_to_depth")

benchmark = False
algorithm = None
