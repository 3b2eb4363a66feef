"""The runtime every kernel engine shares, one job per module, importing nothing else of ember:
``compiler`` (Numba, imported lazily, and tiered compilation of ember's kernels), ``nbhelpers``
(Numba helpers compiled into kernels), ``diskcache`` (the on-disk home of generated kernel
modules), ``hostrecords`` (per-host measurements kept as JSON), ``threads`` (thread counts,
BLAS threads, Numba's threading layer), ``blas_core`` (NumPy's OpenBLAS on the fastest kernel
table the host executes), ``threadpool``
(ember's parallel loop), ``cpu`` (the host's vector ISA) and ``memory`` (malloc tuning, frozen
arrays). Importing the package imports none of them."""
