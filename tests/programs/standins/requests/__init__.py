"""A stand-in for the part of ``requests`` that pytorch/examples programs use (``get``, with
``stream=True``, as a context manager, ``.raw``, ``.content``), that never touches the network:
it serves only the local files that ``$REQUESTS_STANDIN_FILES`` (a JSON object, URL -> path)
maps, which the tests generate in the format of the real download, and raises ConnectionError
for any other URL."""
import io
import json
import os

from .exceptions import ConnectionError, HTTPError, RequestException  # noqa: F401

__version__ = "0.0-standin"


class Response:
    def __init__(self, url, data):
        self.url, self.status_code, self.reason = url, 200, "OK"
        self.headers = {"Content-Length": str(len(data))}
        self.raw = io.BytesIO(data)

    @property
    def content(self):
        return self.raw.getvalue()

    @property
    def text(self):
        return self.content.decode("utf8")

    @property
    def ok(self):
        return self.status_code < 400

    def iter_content(self, chunk_size=1, decode_unicode=False):
        while True:
            chunk = self.raw.read(chunk_size)
            if not chunk:
                return
            yield chunk

    def raise_for_status(self):
        if not self.ok:
            raise HTTPError(f"{self.status_code} {self.reason} for url: {self.url}")

    def close(self):
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def request(method, url, **kwargs):
    files = json.loads(os.environ.get("REQUESTS_STANDIN_FILES", "{}"))
    if method.upper() != "GET" or url not in files:
        raise ConnectionError(f"requests stand-in: no network; {method.upper()} {url} is not "
                              "served (REQUESTS_STANDIN_FILES maps the URLs it serves)")
    with open(files[url], "rb") as f:
        return Response(url, f.read())


def get(url, params=None, **kwargs):
    return request("GET", url, params=params, **kwargs)
