"""Run every benchmark and regenerate the README's speed tables.

Usage: python benchmarks/run_all.py                 full run (30 minutes or more on 2 cores, the
                                                    ResNet and ONNX zoo rows most of it): writes
                                                    benchmarks/results/<date>.json and the tables
                                                    between the README's bench markers
       python benchmarks/run_all.py --quick         smoke run: one or two small cases a script, one
                                                    process per library; prints the tables,
                                                    writes nothing unless --json / --readme
       python benchmarks/run_all.py --from-json benchmarks/results/<date>.json
                                                    re-render the README from saved results
Options: --only eager,train_step,networks,programs,conv,inference,pointwise,onnx_export,onnx_import,onnx_zoo;
--repeats N (per library and configuration: processes, default 3); --json PATH; --readme PATH (or
--no-readme).

Every figure comes from worker processes that run one library each (benchmarks/_harness.py):
steps back to back after warm-up, each library's default thread settings, nothing changed in a
peer's environment. This process imports neither ember nor torch. A README section lies between
``<!-- bench:NAME -->`` and ``<!-- /bench -->``; sections whose markers are missing are reported
and skipped. Exit status 1 when a worker failed (its cells read ``-``; the JSON holds the error).
"""
import argparse
import datetime
import importlib
import inspect
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as H  # noqa: E402

# (suite name, script module): each has collect(opts, [machine,] log) -> results and
# render(results) -> {table name: markdown}
SUITES = tuple((name, importlib.import_module(mod)) for name, mod in (
    ("eager", "eager_overhead"), ("train_step", "train_step"), ("networks", "networks"),
    ("programs", "programs"),
    ("conv", "conv"), ("inference", "jit"), ("pointwise", "pointwise"),
    ("onnx_export", "onnx_export"), ("onnx_import", "onnx_import"), ("onnx_zoo", "onnx_zoo"))
    if os.path.exists(os.path.join(H.HERE, mod + ".py")))
README = os.path.join(H.ROOT, "README.md")
RESULTS = os.path.join(H.HERE, "results")
# a section: its opening marker, a body (possibly empty, never another section's marker), the
# closing marker
MARKER = re.compile(r"(<!-- bench:(?P<name>[^>\n]+?) -->\n)(?P<body>(?:(?!<!-- bench:).)*?)"
                    r"(\n?<!-- /bench -->)", re.S)


def render_all(data):
    """{section name: markdown} from a results document (``{"machine", "results"}``)."""
    tables = {"machine": H.machine_line(data["machine"])}
    for name, mod in SUITES:
        if name in data["results"]:
            try:
                tables.update(mod.render(data["results"][name]))
            except Exception as e:   # e.g. results saved by an older version of the script
                print(f"cannot render {name}: {type(e).__name__}: {e}", file=sys.stderr)
    return tables


def update_readme(text, tables):
    """``text`` with each marked section's body replaced by ``tables[name]``; returns (new text,
    names of tables without a marker)."""
    seen = set()

    def sub(m):
        name = m.group("name")
        if name not in tables:
            return m.group(0)
        seen.add(name)
        return m.group(1) + tables[name] + "\n" + m.group(4).lstrip("\n")
    new = MARKER.sub(sub, text)
    return new, sorted(set(tables) - seen)


def write_readme(path, tables):
    with open(path) as f:
        text = f.read()
    new, missing = update_readme(text, tables)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)
    return missing


def failures(results):
    """(section, case, column, error) of every failed worker."""
    out = []
    for section, cases in results.items():
        for case, cols in cases.items():
            for col, runs in cols.items():
                out += [(section, case, col, e) for e in H.errors(runs)]
    return out


def unsteady(results):
    """(section, case, column, measurement) timed while ember's background compiles still ran
    (its compile wait ran out), as a list of strings."""
    out = []
    for section, cases in results.items():
        for case, cols in cases.items():
            for col, runs in cols.items():
                for r in runs:
                    out += [f"{section} {case} {col} {k}" for k, v in r.items()
                            if isinstance(v, dict) and v.get("steady") is False]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--only", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--readme", default=None)
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--from-json", default=None)
    args = ap.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if args.from_json:
        import json
        with open(args.from_json) as f:
            data = json.load(f)
    else:
        opts = H.Options(quick=args.quick, repeats=args.repeats)
        only = args.only.split(",") if args.only else [n for n, _ in SUITES]
        start = time.perf_counter()
        machine = H.machine_info()
        data = {"machine": machine, "results": {},
                "options": {"quick": opts.quick, "repeats": opts.repeats,
                            "min_time_s": opts.min_time, "min_steps": opts.min_steps}}
        for name, mod in SUITES:
            if name not in only:
                continue
            t0 = time.perf_counter()
            log(f"{name} ...")
            if "machine" in inspect.signature(mod.collect).parameters:
                data["results"][name] = mod.collect(opts, machine, log)
            else:
                data["results"][name] = mod.collect(opts, log=log)
            log(f"{name}: {time.perf_counter() - t0:.0f} s")
        machine["loadavg_end"] = list(os.getloadavg())
        data["unsteady"] = unsteady(data["results"])
        data["elapsed_s"] = time.perf_counter() - start
        log(f"all: {data['elapsed_s']:.0f} s")
        json_path = args.json
        if json_path is None and not args.quick:
            day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
            json_path = os.path.join(RESULTS, f"{day}.json")
        if json_path:
            H.write_json(json_path, data)
            log(f"raw results: {json_path}")
    tables = render_all(data)
    for name, text in tables.items():
        print(f"<!-- bench:{name} -->\n{text}\n<!-- /bench -->\n")
    readme = args.readme or (None if (args.quick or args.no_readme) else README)
    if readme and not args.no_readme:
        missing = write_readme(readme, tables)
        log(f"updated {readme}" + (f"; no marker for: {', '.join(missing)}" if missing else ""))
    for item in data.get("unsteady", []):
        log(f"not steady (compiles still running while timed): {item}")
    failed = failures(data["results"])
    for section, case, col, err in failed:
        log(f"FAILED {section} {case} {col}: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
