"""The op_db coverage report: pytest hooks (installed by tests/conftest.py) that gather what each
op_db test recorded -- on xdist workers too, through the reports' ``user_properties`` -- and print
the figures at the end of the run; with ``EMBER_OPDB_REPORT=path`` the full report (every failing
and unresolved entry) is also written to that file. Standard library only: the hooks load in
every test run, with or without torch."""
import collections
import os

AREAS = ("torch / Tensor", "nn.functional", "linalg", "fft", "special", "signal", "masked",
         "sparse", "private/cuda")

_records = {}
_meta = {}
_figures = []


def pytest_runtest_logreport(report):
    """Collect the op_db records a test attached to its report."""
    for name, value in getattr(report, "user_properties", ()):
        if name == "op_db":
            for eid, area, status, where, detail, known in value:
                _records[eid] = (area, status, where, detail, known)
        elif name == "op_db_torch":
            _meta["torch"] = value
        elif name == "figure" and value not in _figures:   # a line another suite wants in
            _figures.append(value)                           # the summary (ONNX node tests)


def _pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def _category(reason):
    return reason.split(":", 1)[0].strip() if reason else "not in known_failures.yaml"


def build(records, torch_version=None, full=False):
    """The report's lines for ``records`` ({entry id: (area, status, where, detail, known)})."""
    by_status = collections.Counter(r[1] for r in records.values())
    total = len(records)
    excluded = by_status["excluded"]
    in_scope = total - excluded
    passing, failing = by_status["pass"], by_status["fail"]
    resolved = passing + failing
    lines = [f"op_db coverage (torch {torch_version or '?'}): {total} entries, "
             f"{excluded} excluded (tests/op_db/excluded.yaml), {in_scope} in scope",
             f"  resolved: {resolved} of {in_scope} in scope ({_pct(resolved, in_scope)}; "
             f"{_pct(resolved, total)} of all entries)",
             f"  passing every sample: {passing} of {resolved} resolved "
             f"({_pct(passing, resolved)}); failing: {failing}",
             f"  {'area':<16}{'entries':>8}{'excluded':>9}{'resolved':>9}{'passing':>8}"]
    areas = collections.defaultdict(collections.Counter)
    for area, status, *_ in records.values():
        areas[area][status] += 1
    for area in sorted(areas, key=lambda a: AREAS.index(a) if a in AREAS else len(AREAS)):
        c = areas[area]
        lines.append(f"  {area:<16}{sum(c.values()):>8}{c['excluded']:>9}"
                     f"{c['pass'] + c['fail']:>9}{c['pass']:>8}")
    reasons = collections.Counter(_category(r[4]) for r in records.values() if r[1] == "fail")
    if reasons:
        lines.append("  failure reasons (tests/op_db/known_failures.yaml), most common first:")
        lines += [f"    {n:>4}  {reason}" for reason, n in reasons.most_common(None if full else 8)]
    if full:
        lines.append("failing entries:")
        lines += [f"  {eid} ({r[2]}): {r[4] or '-'}\n      first mismatch: {r[3]}"
                  for eid, r in sorted(records.items()) if r[1] == "fail"]
        lines.append("unresolved entries (no ember equivalent yet):")
        for area in AREAS:
            names = sorted(eid for eid, r in records.items()
                           if r[1] == "unresolved" and r[0] == area)
            if names:
                lines.append(f"  {area} ({len(names)}): " + " ".join(names))
        lines.append("excluded entries:")
        lines += [f"  {eid}: {r[3]}" for eid, r in sorted(records.items())
                  if r[1] == "excluded"]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus=None, config=None):
    """Print the figures; write the full report where EMBER_OPDB_REPORT says."""
    if hasattr(terminalreporter.config, "workerinput"):
        return
    if _figures:
        terminalreporter.write_sep("=", "figures")
        for line in _figures:
            terminalreporter.write_line(line)
    if not _records:
        return
    terminalreporter.write_sep("=", "op_db coverage")
    for line in build(_records, _meta.get("torch")):
        terminalreporter.write_line(line)
    path = os.environ.get("EMBER_OPDB_REPORT")
    if path:
        with open(path, "w") as f:
            f.write("\n".join(build(_records, _meta.get("torch"), full=True)) + "\n")
        terminalreporter.write_line(f"  full report written to {path}")
