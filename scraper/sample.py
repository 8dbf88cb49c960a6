"""Serve the bundled sample guideline site on a loopback port, and list its declared pages.

The sample site (data/sample_site/) is a static Japanese patient guidebook written for
guiderag's demo and tests. It is served by the standard library's `http.server`, which
sends `text/html` WITHOUT a charset, exactly the situation a real scraper must survive.
`content_pages.txt` beside it declares the true content pages (one site-relative path a
line), so harvesting and classification can be scored for precision and recall.
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urljoin, urlsplit

from guiderag.errors import InputError
from guiderag.resources import SAMPLE_TOC_PATH, sample_site_dir

CONTENT_LIST_NAME = "content_pages.txt"


class _QuietHandler(SimpleHTTPRequestHandler):
    """Static file handler that does not write an access log line per request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib name)
        pass


def _check_site(root: Path) -> None:
    if not (root / SAMPLE_TOC_PATH).is_file():
        raise InputError(
            f"sample site not found: {root / SAMPLE_TOC_PATH} does not exist; "
            "the bundled data of guiderag is incomplete: reinstall guiderag (pip install --force-reinstall)"
        )


@contextmanager
def serve_on_loopback(handler: Callable[..., BaseHTTPRequestHandler], name: str = "loopback-site") -> Iterator[str]:
    """Serve `handler` on 127.0.0.1 (a free port); yield "http://127.0.0.1:PORT".

    The threaded server runs in a daemon thread and is shut down when the block exits.
    Used for the sample site and the devbench site, and by the tests' fixture sites."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve the static folder `root` on 127.0.0.1 (a free port); yield its base URL ('http://.../')."""
    with serve_on_loopback(functools.partial(_QuietHandler, directory=str(root)), "static-site") as base:
        yield base + "/"


@contextmanager
def serve_sample_site(root: Path | None = None) -> Iterator[str]:
    """Serve the sample site in `root` (default: the bundled one) on loopback and yield the URL
    of its table of contents."""
    root = Path(root) if root is not None else sample_site_dir()
    _check_site(root)
    with serve_directory(root) as base:
        yield base + SAMPLE_TOC_PATH


def declared_content_paths(root: Path | None = None) -> list[str]:
    """The site-relative paths of the true content pages, in declared order."""
    listing = (Path(root) if root is not None else sample_site_dir()) / CONTENT_LIST_NAME
    if not listing.is_file():
        raise InputError(f"declared content list not found: {listing}")
    paths = []
    for raw in listing.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            paths.append(line.lstrip("/"))
    return paths


def sample_content_urls(base_url: str, root: Path | None = None) -> set[str]:
    """Absolute URLs of the declared content pages on the server at `base_url`.

    `base_url` may be any URL of that server (the TOC URL yielded by `serve_sample_site`
    or its root); only its scheme and host:port are used.
    """
    parts = urlsplit(base_url)
    if not parts.scheme or not parts.netloc:
        raise InputError(f"not an absolute URL: {base_url!r}")
    site_root = f"{parts.scheme}://{parts.netloc}/"
    return {urljoin(site_root, path) for path in declared_content_paths(root)}
