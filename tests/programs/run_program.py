"""Run a program written for PyTorch as ``__main__``, on ember or on torch.

    python tests/programs/run_program.py ember|torch PROGRAM.py [ARGS...]

With ``ember``, ``import torch`` and ``import torch.<sub>`` give ``ember`` and ``ember.<sub>``
(alias/torch_alias.py; the program's files are not touched), in this process and, through
alias/sitecustomize.py on PYTHONPATH, in every Python process it starts. The program's folder
is ``sys.path[0]``, as when Python runs it directly, and ``standins/`` (the torchvision
stand-in, written against ``torch``, and the network-free ``requests`` and ``tiktoken``
stand-ins) follows it.
"""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ALIAS, STANDINS = os.path.join(HERE, "alias"), os.path.join(HERE, "standins")


def main(argv):
    backend, program, args = argv[0], os.path.abspath(argv[1]), argv[2:]
    sys.path[0:1] = [os.path.dirname(program), STANDINS]
    if backend == "ember":
        os.environ["EMBER_TORCH_ALIAS"] = "1"
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [ALIAS] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        sys.path.insert(1, ALIAS)
        import torch_alias
        torch_alias.install()
    elif backend != "torch":
        raise SystemExit(f"run_program: backend must be 'ember' or 'torch', got {backend!r}")
    sys.argv = [program] + args
    runpy.run_path(program, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
