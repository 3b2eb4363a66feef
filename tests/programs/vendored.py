"""Programs vendored from public repositories: each SOURCE.md pins a commit and lists every
file with its git blob id in a table (rows ``| `path` | `blob` |``, or with the repository
first: ``| `repo` | `path` | `blob` |``); the tests check the files against it."""
import hashlib
import os
import re

_BLOB = re.compile(r"[0-9a-f]{40}")


def blob_id(data):
    """The git blob id of ``data`` (bytes): what ``git hash-object`` prints for the file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_blob_id(path):
    with open(path, "rb") as f:
        return blob_id(f.read())


def file_blobs(root):
    """{path relative to ``root`` (with /): git blob id} of every file under ``root`` but
    SOURCE.md files and ``__pycache__`` folders."""
    found = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name != "SOURCE.md":
                path = os.path.join(folder, name)
                found[os.path.relpath(path, root).replace(os.sep, "/")] = file_blob_id(path)
    return found


def source_rows(source_md):
    """The file rows of SOURCE.md's tables: a tuple of their backticked cells, the blob id
    last."""
    rows = []
    with open(source_md, encoding="utf8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and all(len(c) > 2 and c[0] == c[-1] == "`" for c in cells):
                cells = [c[1:-1] for c in cells]
                if _BLOB.fullmatch(cells[-1]):
                    rows.append(tuple(cells))
    return rows


def source_blobs(source_md):
    """{path: blob id} of a SOURCE.md whose rows are ``| `path` | `blob` |``."""
    return {row[0]: row[-1] for row in source_rows(source_md) if len(row) == 2}


def source_commit(source_md):
    """The first pinned commit SOURCE.md names (``commit `<40 hex>` ``)."""
    with open(source_md, encoding="utf8") as f:
        return re.search(r"commit `([0-9a-f]{40})`", f.read()).group(1)
