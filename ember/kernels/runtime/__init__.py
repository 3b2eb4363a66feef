"""The runtime every kernel engine shares, one job per module, importing nothing else of ember:
``compiler`` (Numba, imported lazily, and tiered compilation of ember's kernels), ``nbhelpers``
(Numba helpers compiled into kernels), ``diskcache`` (the on-disk home of generated kernel
modules), ``threads`` (thread counts, BLAS threads, Numba's threading layer), ``threadpool``
(ember's parallel loop), ``cpu`` (the host's vector ISA) and ``memory`` (malloc tuning, frozen
arrays). Importing the package imports none of them."""
