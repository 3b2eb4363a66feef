"""Run at interpreter start when this folder is on PYTHONPATH (run_program.py puts it there
for the ember backend): child processes (multiprocessing spawn / forkserver, subprocesses)
get the ``torch`` -> ``ember`` alias too."""
import os

if os.environ.get("EMBER_TORCH_ALIAS") == "1":
    import torch_alias
    torch_alias.install()
