"""``ember onnx show MODEL.onnx`` and ``ember onnx verify FILE.py``: the ONNX subcommands of the
``ember`` command (``add_subparser(subparsers)`` registers them, ``run(args)`` runs them)."""
import os
import runpy
import sys

__all__ = ["add_subparser", "run", "main"]


def add_subparser(subparsers):
    """Add the ``onnx`` command (with ``show`` and ``verify``) to an argparse subparsers set."""
    p = subparsers.add_parser("onnx", help="show or verify ONNX exports",
                              description="Inspect an ONNX file or export-and-verify a model.")
    sub = p.add_subparsers(dest="onnx_command", metavar="subcommand")
    s = sub.add_parser("show", help="print an ONNX model in ONNX's text syntax with a summary")
    s.add_argument("path", help="an .onnx file")
    s.add_argument("--summary-only", action="store_true", help="print the summary only")
    s.add_argument("--full", action="store_true", help="print initializer values in full")
    v = sub.add_parser("verify", help="export a model defined in a Python file and compare "
                       "onnxruntime with ember",
                       description="FILE.py must define `model` (or build_model()/get_model()) "
                       "and `example_inputs` (or example_inputs()/get_inputs()): a tensor or "
                       "a tuple of tensors.")
    v.add_argument("file", help="a Python file defining the model and example inputs")
    v.add_argument("--opset", type=int, default=17, help="opset version (13..21, default 17)")
    v.add_argument("--rtol", type=float, default=1e-4)
    v.add_argument("--atol", type=float, default=1e-5)
    v.add_argument("--dynamic-batch", action="store_true",
                   help="make axis 0 of every input and output dynamic")
    v.add_argument("-o", "--output", help="also save the exported model here")
    return p


def _get(ns, *names):
    for n in names:
        if n in ns:
            obj = ns[n]
            return obj() if callable(obj) and not hasattr(obj, "named_parameters") and \
                n != "model" else obj
    return None


def _show(args):
    from ember.onnx.text import summary, to_text
    if not os.path.exists(args.path):
        print(f"ember onnx show: no such file: {args.path}", file=sys.stderr)
        return 2
    if args.summary_only:
        print(summary(args.path))
    else:
        print(to_text(args.path, elide_initializers=not args.full))
    return 0


def _verify(args):
    import ember
    from ember.onnx import verify
    if not os.path.exists(args.file):
        print(f"ember onnx verify: no such file: {args.file}", file=sys.stderr)
        return 2
    ns = runpy.run_path(args.file, run_name="__ember_onnx_verify__")
    model = _get(ns, "model", "build_model", "get_model")
    inputs = _get(ns, "example_inputs", "get_inputs")
    if model is None or inputs is None:
        print("ember onnx verify: the file must define `model` (or build_model()) and "
              "`example_inputs` (or get_inputs())", file=sys.stderr)
        return 2
    if isinstance(inputs, ember.Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    kw = {}
    if args.dynamic_batch:
        names = [f"input{i}" for i in range(len(inputs))]
        kw = {"input_names": names, "dynamic_axes": {n: {0: "batch"} for n in names}}
    res = verify(model, inputs, opset_version=args.opset, rtol=args.rtol, atol=args.atol, **kw)
    from ember.onnx.text import summary
    print(summary(res.model))
    print(res.report())
    if args.output:
        from ember.onnx.exporter import _write
        _write(res.model.SerializeToString(), args.output)
        print(f"saved {args.output}")
    return 0 if res.ok else 1


def run(args):
    """Run a parsed ``ember onnx ...`` command; returns the exit status."""
    cmd = getattr(args, "onnx_command", None)
    if cmd == "show":
        return _show(args)
    if cmd == "verify":
        return _verify(args)
    print("usage: ember onnx {show,verify} ...", file=sys.stderr)
    return 2


def main(argv=None):
    """Standalone entry: ``python -m ember.onnx.cli show model.onnx``."""
    import argparse
    parser = argparse.ArgumentParser(prog="ember")
    sub = parser.add_subparsers(dest="command")
    add_subparser(sub)
    args = parser.parse_args(["onnx"] + list(sys.argv[1:] if argv is None else argv))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
