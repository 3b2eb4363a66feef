"""Pooling kernels on ndarrays: max, average and adaptive pooling in 1-d and 2-d (``pool2d``, the
1-d forms as 2-d of height 1, its Numba kernels in ``pool2d_numba``), 3-d (``pool3d``) and
fractional max pooling (``fractional``)."""
