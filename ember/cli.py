"""The ``ember`` command. ``ember demo`` trains a LeNet-style CNN on the UCI handwritten digits
shipped in ``ember/datasets`` and saves a checkpoint with ``ember.save``."""
import argparse
import os
import sys
import time

import numpy as np


def _progress(iterable, total, desc, enabled):
    """tqdm when installed (and wanted), else the iterable itself."""
    if not enabled:
        return iterable, None
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable, None
    bar = tqdm(iterable, total=total, desc=desc, leave=False, unit="batch", file=sys.stdout,
               dynamic_ncols=True)
    return bar, bar


def build_model():
    """LeNet-style CNN for 1x8x8 inputs: two conv+relu+maxpool stages, then three linears."""
    from ember import nn
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def _accuracy(model, x, y):
    import ember
    with ember.no_grad():
        logits = model(x)
        loss = float(ember.nn.functional.cross_entropy(logits, y))
        acc = float((logits.argmax(1) == y).float().mean())
    return loss, acc


def _optional_export(model, example, out_dir, log):
    """Trace with ember.jit (printing the IR), export with ember.onnx and verify the export in
    onnxruntime on another batch size (dynamic batch axis). Each optional step reports why it was
    skipped instead of failing the demo."""
    import importlib
    import ember
    try:
        jit = importlib.import_module("ember.jit")
    except ImportError:
        return
    try:
        traced = jit.trace(model, (example,))
        log("jit: traced IR of the model:")
        log(str(traced.graph))
        other = ember.cat([example, example[:1]])
        with ember.no_grad():
            diff = float((traced(other) - model(other)).abs().max())
        log(f"jit: traced vs eager on batch {other.shape[0]}: max |difference| = {diff:.2e}")
    except Exception as e:  # noqa: BLE001 - an optional step must not fail the demo
        log(f"jit: skipped ({type(e).__name__}: {e})")
        return
    try:
        onnx = importlib.import_module("ember.onnx")
        importlib.import_module("onnx")
    except ImportError:
        log("onnx: skipped (install ember[onnx] for export and verification)")
        return
    try:
        path = os.path.join(out_dir, "lenet_digits.onnx")
        axes = {"images": {0: "batch"}, "logits": {0: "batch"}}
        onnx.export(model, (example,), path, input_names=["images"], output_names=["logits"],
                    dynamic_axes=axes)
        log(f"onnx: exported {path}")
        try:
            importlib.import_module("onnxruntime")
        except ImportError:
            log("onnx: verification skipped (onnxruntime not installed)")
            return
        other = ember.cat([example, example[:1]])
        result = onnx.verify(model, (example,), check_args=(other,), input_names=["images"],
                             output_names=["logits"], dynamic_axes=axes)
        log(f"onnx: onnxruntime vs ember on batch {other.shape[0]}: " + ", ".join(
            f"max |difference| = {d:.2e}" for d in result.max_abs_diff) +
            (" (ok)" if result.ok else " (MISMATCH)"))
    except Exception as e:  # noqa: BLE001
        log(f"onnx: skipped ({type(e).__name__}: {e})")


def demo(epochs=12, seed=0, out="out", batch_size=32, lr=3e-3, progress=True, log=print):
    """Train the demo CNN; returns a dict summary (test accuracy, checkpoint path, ...)."""
    import ember
    from ember import nn, optim
    from ember.datasets import load_digits
    from ember.utils.data import DataLoader, TensorDataset

    t0 = time.perf_counter()
    ember.manual_seed(seed)
    images, labels = load_digits(as_tensors=True)
    images = images.unsqueeze(1)
    perm = np.random.default_rng(seed).permutation(len(labels))
    n_test = len(perm) // 5
    test_idx, train_idx = perm[:n_test], perm[n_test:]
    x_train, y_train = images[ember.from_numpy(train_idx)], labels[ember.from_numpy(train_idx)]
    x_test, y_test = images[ember.from_numpy(test_idx)], labels[ember.from_numpy(test_idx)]
    mean, std = float(x_train.mean()), float(x_train.std())
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    gen = ember.Generator().manual_seed(seed)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True,
                        generator=gen)
    model = build_model()
    n_params = sum(p.numel() for p in model.parameters())
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
    loss_fn = nn.CrossEntropyLoss()
    log(f"ember demo: LeNet-style CNN ({n_params:,} parameters) on the UCI digits "
        f"({len(train_idx)} train / {len(test_idx)} test images, 8x8), {epochs} epochs, "
        f"seed {seed}")
    if progress and sys.stdout.isatty():
        import importlib.util
        if importlib.util.find_spec("tqdm") is None:
            log("progress bar: skipped (install ember[io] for tqdm)")
    history, batch_seconds = [], []  # wall time of each step of the first epoch
    for epoch in range(1, epochs + 1):
        model.train()
        total, correct, seen = 0.0, 0, 0
        batches, bar = _progress(loader, len(loader), f"epoch {epoch}/{epochs}", progress)
        for xb, yb in batches:
            t_batch = time.perf_counter()
            opt.zero_grad()
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            n = len(yb)
            total += float(loss) * n
            correct += int((logits.argmax(1) == yb).sum())
            seen += n
            if epoch == 1:
                batch_seconds.append(time.perf_counter() - t_batch)
            if bar is not None:
                bar.set_postfix(loss=f"{total / seen:.4f}", acc=f"{correct / seen:.3f}")
        if bar is not None:
            bar.close()
        sched.step()
        model.eval()
        _, test_acc = _accuracy(model, x_test, y_test)
        history.append((total / seen, correct / seen, test_acc))
        log(f"epoch {epoch:2d}/{epochs}  loss {total / seen:.4f}  train acc {correct / seen:.4f}"
            f"  test acc {test_acc:.4f}")
    model.eval()
    test_loss, test_acc = _accuracy(model, x_test, y_test)
    os.makedirs(out, exist_ok=True)
    ckpt = os.path.join(out, "lenet_digits.safetensors")
    ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epochs,
                "seed": seed, "test_accuracy": test_acc, "normalization": (mean, std)}, ckpt)
    restored = build_model()
    restored.load_state_dict(ember.load(ckpt)["model"])
    restored.eval()
    _, restored_acc = _accuracy(restored, x_test, y_test)
    _optional_export(model, x_test[:4], out, log)
    elapsed = time.perf_counter() - t0
    log("")
    log("summary")
    log(f"  model            LeNet-style CNN, {n_params:,} parameters")
    if history:
        log(f"  final train      loss {history[-1][0]:.4f}, accuracy {history[-1][1]:.4f}")
    log(f"  held-out test    loss {test_loss:.4f}, accuracy {test_acc:.4f} "
        f"({int(round(test_acc * len(test_idx)))}/{len(test_idx)})")
    log(f"  checkpoint       {ckpt} (reloaded: test accuracy {restored_acc:.4f})")
    if batch_seconds:
        log(f"  first batch      {batch_seconds[0] * 1e3:.0f} ms (median batch of epoch 1: "
            f"{float(np.median(batch_seconds)) * 1e3:.1f} ms)")
    log(f"  time             {elapsed:.1f} s")
    return {"test_accuracy": test_acc, "test_loss": test_loss, "checkpoint": ckpt,
            "restored_accuracy": restored_acc, "history": history, "seconds": elapsed,
            "parameters": n_params, "batch_seconds": batch_seconds}


def main(argv=None):
    """Entry point of the ``ember`` console script; returns the exit status."""
    parser = argparse.ArgumentParser(prog="ember", description="ember: a PyTorch-style "
                                     "deep-learning framework on NumPy.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    d = sub.add_parser("demo", help="train a LeNet-style CNN on the bundled handwritten digits",
                       description="Train a LeNet-style CNN on the UCI handwritten digits "
                       "(1,797 8x8 images shipped with ember; CC BY 4.0, Alpaydin & Kaynak), "
                       "report per-epoch loss and accuracy and held-out test accuracy, and save "
                       "a checkpoint with ember.save.")
    d.add_argument("--epochs", type=int, default=12, help="training epochs (default 12)")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument("--out", default="out", help="folder for the checkpoint (default ./out)")
    d.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    d.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    from ember.onnx.cli import add_subparser as _add_onnx, run as _run_onnx
    _add_onnx(sub)
    r = sub.add_parser("run", help="run a script on N MPI ranks (ember.distributed)",
                       description="Start N ranks of a script with the installed mpiexec; an "
                       "uncaught exception on any rank prints the rank and traceback and aborts "
                       "every rank.")
    r.add_argument("-n", "--nproc", type=int, default=1, help="number of ranks (default 1)")
    r.add_argument("--mpiexec", default=None, help="mpiexec to use (default: the one installed "
                   "beside this Python, else the first on PATH)")
    r.add_argument("script", help="the Python script to run")
    r.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    b = sub.add_parser("prebuild", help="compile the kernels of common training steps into an "
                       "install-time cache, so that new processes start on compiled kernels",
                       description="Run small LeNet-style, MLP and GPT-style training steps "
                       "with every kernel compiled up front, into a cache that new processes "
                       "copy from on their first kernel (ember.kernels.runtime.prebuilt; a few "
                       "minutes of one core).")
    b.add_argument("dir", nargs="?", default=None, help="where to build (default: "
                   "$EMBER_PREBUILT_DIR, else <sys.prefix>/share/ember/prebuilt)")
    args = parser.parse_args(argv)
    if args.command == "prebuild":
        from ember.kernels.runtime.prebuilt import build
        try:
            build(args.dir)
        except (RuntimeError, OSError) as e:
            print(f"ember prebuild: {e}", file=sys.stderr)
            return 1
        return 0
    if args.command == "onnx":
        from ember.errors import MissingDependencyError
        try:
            return _run_onnx(args)
        except MissingDependencyError as e:   # names the extra to install
            print(f"ember onnx: {e}", file=sys.stderr)
            return 1
    if args.command == "run":
        from ember.distributed.launch import launch
        from ember.errors import EmberRuntimeError
        try:
            return launch(args.nproc, args.script, args.args, args.mpiexec)
        except EmberRuntimeError as e:
            parser.error(str(e))
    if args.command != "demo":
        parser.print_help()
        return 0 if args.command is None else 2
    if args.epochs < 0:
        parser.error("--epochs must be >= 0")
    demo(epochs=args.epochs, seed=args.seed, out=args.out, batch_size=args.batch_size,
         lr=args.lr, progress=not args.no_progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
