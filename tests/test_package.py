"""Packaging invariants: generated code is fresh, ``import ember`` stays light, tests mirror the
module tree, and no file or text is named after the work item that added it."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_generated_code_is_up_to_date():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_autograd.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_generator_check_fails_when_stale(tmp_path):
    """--check on a copy of the generated files (no tracked file is rewritten): fresh passes,
    one stale line in any of them fails and names it; a missing one, or a file there that is not
    generated, fails too."""
    gen = [sys.executable, os.path.join(ROOT, "tools", "gen_autograd.py"), "--out-dir",
           str(tmp_path)]
    assert subprocess.run(gen, capture_output=True).returncode == 0
    r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    names = sorted(os.listdir(tmp_path))
    assert names == ["__init__.py", "functions.py", "methods.py", "nodes.py", "pointwise.py",
                     "records.py"], names
    for name in names:
        with open(tmp_path / name) as fh:
            fresh = fh.read()
        with open(tmp_path / name, "a") as fh:
            fh.write("# stale\n")
        r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
        assert r.returncode == 1 and "stale" in r.stdout and name in r.stdout
        with open(tmp_path / name, "w") as fh:
            fh.write(fresh)
    os.remove(tmp_path / "records.py")
    r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "records.py" in r.stdout
    assert subprocess.run(gen, capture_output=True).returncode == 0
    (tmp_path / "by_hand.py").write_text("x = 1\n")
    r = subprocess.run(gen + ["--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "by_hand.py" in r.stdout and "not generated" in r.stdout


def test_import_ember_loads_no_optional_dependency():
    code = ("import sys, ember; bad = [m for m in ('torch', 'onnx', 'onnxruntime', 'numba', "
            "'scipy', 'safetensors', 'tqdm', 'yaml', 'threadpoolctl') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def _has_code(path):
    """Whether a module holds more than a docstring, imports and ``__all__``."""
    import ast
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign) \
                and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        return True
    return False


def _mirror(module):
    """tests/<the module's folders under ember>/test_<its name, leading and trailing underscores
    dropped>.py: ``_dtype.py`` -> ``test_dtype.py``, ``__main__.py`` -> ``test_main.py``."""
    folders, name = os.path.split(os.path.relpath(module, "ember"))
    return os.path.join("tests", folders, f"test_{name[:-3].strip('_')}.py")


def _modules_and_mirrors():
    """Every module of ember with code but packages' ``__init__`` and the generated files (tested
    through their spec: tests/autograd/test_spec_ops.py), each with whether its mirror exists."""
    out = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "ember")):
        for f in files:
            path = os.path.join(folder, f)
            module = os.path.relpath(path, ROOT).replace(os.sep, "/")
            if not f.endswith(".py") or f == "__init__.py" or "/_generated/" in module \
                    or not _has_code(path):
                continue
            out[module] = os.path.isfile(os.path.join(ROOT, _mirror(module)))
    return out


def _not_yet_mirrored():
    """tests/not_mirrored.txt: the modules tested only through other test files (their package's,
    the public API's) as this check came in; it only shrinks."""
    with open(os.path.join(ROOT, "tests", "not_mirrored.txt")) as fh:
        return {line.split("#")[0].strip() for line in fh} - {""}


def test_every_module_has_its_mirrored_test_file():
    """``ember/<folders>/<m>.py`` has ``tests/<folders>/test_<m>.py``, or is listed in
    tests/not_mirrored.txt; a module that gains its test file leaves the list (an entry whose
    module is gone is ignored)."""
    found = _modules_and_mirrors()
    listed = _not_yet_mirrored()
    missing = sorted(m for m, ok in found.items() if not ok and m not in listed)
    assert not missing, "modules without their test file (" + ", ".join(
        _mirror(m) for m in missing) + "): add it (tests mirror the tree)"
    stale = sorted(m for m in listed if found.get(m))
    assert not stale, f"remove from tests/not_mirrored.txt (mirrored now): {stale}"


WORK_ITEM_WORDS = ("breadth", "fixes", "issue", "misc", "more", "extra", "new")


def _named_after_a_work_item(path):
    """Whether a file's name holds a word that names a work item rather than what it holds
    (``test_breadth.py``, ``test_op_db_fixes.py``, ``test_more_optimizers.py``)."""
    words = os.path.basename(path)[:-3].split("_")
    return any(w in WORK_ITEM_WORDS for w in words)


def test_no_module_or_test_file_is_named_after_a_work_item():
    bad = []
    for top in ("ember", "tests", "tools", "benchmarks"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            bad += [os.path.relpath(os.path.join(folder, f), ROOT) for f in files
                    if f.endswith(".py") and _named_after_a_work_item(f)]
    assert not bad, f"name these files for what they hold: {sorted(bad)}"
    assert _named_after_a_work_item("test_more_optimizers.py")
    assert _named_after_a_work_item("tests/ops/test_op_db_fixes.py")
    assert not _named_after_a_work_item("test_newton.py")


def test_no_source_names_an_issue_number():
    """Code, tests and docs say what a thing is, never which work item added it."""
    import re
    pattern = re.compile(r"\bissue\s*#?\d+", re.IGNORECASE)
    bad = []
    for top in ("ember", "tests", "docs", "tools", "benchmarks"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".py", ".md", ".yaml", ".txt")):
                    continue
                path = os.path.join(folder, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    if pattern.search(fh.read()):
                        bad.append(os.path.relpath(path, ROOT))
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        if pattern.search(fh.read()):
            bad.append("README.md")
    assert not bad, f"remove the issue numbers from: {sorted(bad)}"
    assert pattern.search("as issue " + "26 asked") and not pattern.search("an issue with 2 GPUs")


def test_test_files_import_under_distinct_names():
    """pytest imports a test file in a folder without ``__init__.py`` by its bare name, so two
    such files of one name (``tests/kernels/test_fft.py`` and ``tests/kernels/conv/test_fft.py``,
    as mirroring makes) fail collection with 'import file mismatch': each test folder is a
    package."""
    seen = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        if "__pycache__" in folder:
            continue
        for f in files:
            if not (f.startswith("test_") and f.endswith(".py")):
                continue
            parts, up = [f[:-3]], folder
            while os.path.isfile(os.path.join(up, "__init__.py")):
                parts.insert(0, os.path.basename(up))
                up = os.path.dirname(up)
            seen.setdefault(".".join(parts), []).append(os.path.relpath(os.path.join(folder, f),
                                                                       ROOT))
    clashes = {k: v for k, v in seen.items() if len(v) > 1}
    assert not clashes, f"test files imported under one name (add __init__.py): {clashes}"
    assert "tests.kernels.conv.test_fft" in seen and "tests.kernels.test_fft" in seen
