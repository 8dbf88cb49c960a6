"""The index on disk: versions written whole and swapped in atomically, checked when loaded.

A build writes a `tmp-*` directory, renames it to `v-*` and only then replaces CURRENT
(os.replace is atomic), so a reader sees the old index or the new one, never a half-built
one. While it writes, the build holds a flock on `.tmp-<name>.lock` beside its folder; the
system drops the lock when the process dies, however it dies, so the next build removes
the folders of dead builds (`remove_stale_builds`) and never one still being written. Nothing is unpickled: a user who can write the index folder cannot make us run code.
Every file's checksum is in the manifest; a missing, damaged, stale or foreign index is
an IndexCorruptError, which the loader answers by rebuilding.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from guiderag.errors import IndexCorruptError, IndexWriteError, StoreError
from guiderag.store import PageVersion
from guiderag.store.lock import file_lock

from .index import INDEX_FORMAT, MATRICES, IndexData
from .lines import LineData

# Threads writing a version's files at once (_write).
SAVE_THREADS = 2


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_data(data: IndexData, index_dir: Path) -> Path:
    """Write `data` as a new version and make it current atomically. Returns its folder."""
    index_dir = Path(index_dir)
    name = f"v-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
    tmp = index_dir / ("tmp-" + name)
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IndexWriteError(f"cannot create the index folder {index_dir} ({exc}); fix permissions, then "
                              "run `guiderag index`. The previous index is unchanged.") from exc
    remove_stale_builds(index_dir)
    lock = build_lock_path(tmp)
    try:
        with file_lock(lock, wait=False, what="the index build lock"):
            _write(data, index_dir, name, tmp)
    except StoreError as exc:
        raise IndexWriteError(f"cannot write the retrieval index under {index_dir} ({exc})") from exc
    finally:
        lock.unlink(missing_ok=True)
    _prune(index_dir, keep=name)
    return index_dir / name


def build_lock_path(tmp: Path) -> Path:
    """The lock file a build holds while it writes its temporary folder `tmp`."""
    return tmp.with_name(f".{tmp.name}.lock")


def remove_stale_builds(index_dir: Path) -> list[str]:
    """Remove the temporary folders (and lock files) of builds whose process died (killed,
    SIGTERM, a power cut) and return their names. A folder whose build still holds its
    lock, in this process or another, is left alone."""
    removed: list[str] = []
    index_dir = Path(index_dir)
    if not index_dir.is_dir():
        return removed
    for tmp in sorted(index_dir.glob("tmp-*")):
        lock = build_lock_path(tmp)
        try:
            with file_lock(lock, wait=False, what="the index build lock"):
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
                    removed.append(tmp.name)
            lock.unlink(missing_ok=True)
        except (BlockingIOError, StoreError, OSError):
            continue  # a live build holds it (or the folder cannot be written: nothing to do here)
    for lock in index_dir.glob(".tmp-*.lock"):  # a build that died before making its folder
        if not lock.with_name(lock.name[1:-len(".lock")]).exists():
            try:
                with file_lock(lock, wait=False, what="the index build lock"):
                    lock.unlink(missing_ok=True)
            except (BlockingIOError, StoreError, OSError):
                continue
    return removed


def _files(data: IndexData) -> dict[str, Callable[[Path], object]]:
    """Each file of a version but its manifest, and how it is written: the biggest first."""
    lines = data.lines

    def vocab(path: Path) -> None:
        words = {
            "terms": sorted(data.term_vocab, key=data.term_vocab.__getitem__),
            "bigrams": sorted(data.bigram_vocab, key=data.bigram_vocab.__getitem__),
            "line_terms": list(lines.extra_terms),
        }
        path.write_text(json.dumps(words, ensure_ascii=False), encoding="utf-8")

    def matrix(key: str) -> Callable[[Path], None]:
        return lambda path: sp.save_npz(path, getattr(data, key).tocsc(), compressed=False)

    return {
        **{f"{key}.npz": matrix(key) for key in sorted(MATRICES, key=lambda key: -getattr(data, key).nnz)},
        "lines.txt": lambda path: path.write_text(lines.flat, encoding="utf-8"),
        "lines.npz": lambda path: np.savez(path, **{k: getattr(lines, k) for k in LineData.ARRAYS}),
        "arrays.npz": lambda path: np.savez(
            path,
            term_idf=data.term_idf,
            bigram_idf=data.bigram_idf,
            passage_page=data.passage_page,
            passage_heading=data.passage_heading,
            passage_first=data.passage_first,
            passage_last=data.passage_last,
            passage_span_first=data.passage_span_first,
            passage_span_end=data.passage_span_end,
            n_spans=np.asarray([data.n_spans], dtype=np.int64),
        ),
        "vocab.json": vocab,
    }


def _write(data: IndexData, index_dir: Path, name: str, tmp: Path) -> None:
    """Write the version `name` in `tmp`, rename it and point CURRENT at it. The files are
    written and checksummed by SAVE_THREADS threads (what costs, the writes, zlib's CRC of
    the .npz members and the SHA-256, runs without the GIL)."""
    try:
        tmp.mkdir()
        writers = _files(data)

        def write(fname: str) -> tuple[str, str]:
            path = tmp / fname
            writers[fname](path)
            return fname, _sha256(path)

        with ThreadPoolExecutor(SAVE_THREADS, thread_name_prefix="guiderag-index-save") as pool:
            files = dict(sorted(pool.map(write, writers)))
        lines = data.lines
        manifest = {
            "format": INDEX_FORMAT,
            "corpus_version": data.corpus_version,
            "fingerprint": data.fingerprint,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pages": [list(k) for k in data.page_keys],
            "passages": data.n_passages,
            "chars": data.chars,
            "lines": {"texts": lines.n_texts, "heading_max_chars": lines.heading_max_chars},
            "files": files,
        }
        with open(tmp / "manifest.json", "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        final = index_dir / name
        os.rename(tmp, final)
        pointer = index_dir / f"CURRENT.{name}.tmp"
        with open(pointer, "w", encoding="utf-8") as fh:
            fh.write(name + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(pointer, index_dir / "CURRENT")
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise IndexWriteError(
            f"cannot write the retrieval index under {index_dir} ({exc}); free disk space or "
            "fix permissions, then run `guiderag index`. The previous index is unchanged."
        ) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _prune(index_dir: Path, keep: str) -> None:
    """Drop old versions (keeping the newest previous one, a reader may still load it)
    and the temporary folders of dead builds."""
    versions = sorted(
        (p for p in index_dir.glob("v-*") if p.is_dir() and p.name != keep),
        key=lambda p: p.stat().st_mtime,
    )
    for old in versions[:-1]:
        shutil.rmtree(old, ignore_errors=True)
    remove_stale_builds(index_dir)


def remove_index(index_dir: Path) -> bool:
    """Delete the index in `index_dir` (CURRENT, its versions, dead builds' folders; a
    build still writing keeps its own), leaving anything else there (the default
    guideline's folder holds the other guidelines' folders); the folder itself goes when
    nothing is left. True when there was one."""
    index_dir = Path(index_dir)
    if not index_dir.is_dir():
        return False
    found = False
    for path in [index_dir / "CURRENT", *index_dir.glob("CURRENT.*.tmp")]:
        if path.exists():
            path.unlink()
            found = True
    for folder in index_dir.glob("v-*"):
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            found = True
    found = bool(remove_stale_builds(index_dir)) or found
    try:
        index_dir.rmdir()  # only when empty
    except OSError:
        pass
    return found


def _corrupt(index_dir: Path, what: str) -> IndexCorruptError:
    return IndexCorruptError(
        f"the retrieval index in {index_dir} {what}; run `guiderag index` to rebuild it "
        "(the ask command and the app rebuild it automatically)"
    )


def load_data(index_dir: Path, *, verify: bool = True) -> IndexData:
    """Load the current version; IndexCorruptError when missing, partial or damaged."""
    index_dir = Path(index_dir)
    pointer = index_dir / "CURRENT"
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise _corrupt(index_dir, "does not exist yet (no CURRENT file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _corrupt(index_dir, f"has an unreadable CURRENT file ({exc})") from exc
    if not name.startswith("v-") or "/" in name or "\\" in name:
        raise _corrupt(index_dir, f"has a CURRENT file naming {name!r}, not an index version")
    folder = index_dir / name
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("format") != INDEX_FORMAT:
            raise _corrupt(index_dir, f"has format {manifest.get('format')!r}, expected {INDEX_FORMAT}")
        files = manifest["files"]
        for fname in [f"{m}.npz" for m in MATRICES] + ["arrays.npz", "vocab.json", "lines.npz", "lines.txt"]:
            path = folder / fname
            if fname not in files:
                raise _corrupt(index_dir, f"lists no checksum for {fname}")
            if not path.exists():
                raise _corrupt(index_dir, f"is missing {path.name} in {folder.name}")
            if verify and _sha256(path) != files[fname]:
                raise _corrupt(index_dir, f"has a damaged file {path.name} (checksum mismatch)")
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        with np.load(folder / "arrays.npz", allow_pickle=False) as arrays:
            arr = {k: arrays[k] for k in arrays.files}
        with np.load(folder / "lines.npz", allow_pickle=False) as stored:
            line_arrays = {k: stored[k] for k in LineData.ARRAYS}
        lines = LineData(**line_arrays, extra_terms=list(vocab["line_terms"]),
                         flat=(folder / "lines.txt").read_text(encoding="utf-8"),
                         heading_max_chars=int(manifest["lines"]["heading_max_chars"]))
        mats = {m: sp.load_npz(folder / f"{m}.npz").tocsc() for m in MATRICES}
        data = IndexData(
            corpus_version=manifest["corpus_version"],
            fingerprint=manifest["fingerprint"],
            page_keys=[(u, int(v), h) for u, v, h in manifest["pages"]],
            term_vocab={t: i for i, t in enumerate(vocab["terms"])},
            bigram_vocab={t: i for i, t in enumerate(vocab["bigrams"])},
            term_idf=arr["term_idf"],
            bigram_idf=arr["bigram_idf"],
            passage_page=arr["passage_page"],
            passage_heading=arr["passage_heading"],
            passage_first=arr["passage_first"],
            passage_last=arr["passage_last"],
            passage_span_first=arr["passage_span_first"],
            passage_span_end=arr["passage_span_end"],
            terms=mats["terms"],
            bigrams=mats["bigrams"],
            n_spans=int(arr["n_spans"][0]),
            lines=lines,
            path=folder,
            chars=int(manifest.get("chars", 0)),
        )
    except IndexCorruptError:
        raise
    except FileNotFoundError as exc:
        raise _corrupt(index_dir, f"is incomplete ({exc.filename} missing)") from exc
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt(index_dir, f"cannot be read ({type(exc).__name__}: {exc})") from exc
    _check_shapes(data, index_dir)
    return data


def _check_shapes(data: IndexData, index_dir: Path) -> None:
    np_, nq, ns = data.n_pages, data.n_passages, data.n_spans
    nt, nb = len(data.term_vocab), len(data.bigram_vocab)
    rows = nq + np_ + ns
    for key, matrix, cols in (("terms", data.terms, nt), ("bigrams", data.bigrams, nb)):
        if matrix.shape != (rows, cols):
            raise _corrupt(index_dir, f"has a {key} matrix of shape {matrix.shape}, expected {(rows, cols)}")
    if data.term_idf.shape != (nt,) or data.bigram_idf.shape != (nb,):
        raise _corrupt(index_dir, "has idf vectors that do not match its vocabulary")
    if not all(len(a) == nq for a in (data.passage_heading, data.passage_first, data.passage_last)):
        raise _corrupt(index_dir, "has a passage map of inconsistent length")
    if nq and (data.passage_page.min() < 0 or data.passage_page.max() >= np_):
        raise _corrupt(index_dir, "has a passage map pointing outside its pages")
    if nq > 1 and (np.diff(data.passage_page) < 0).any():
        raise _corrupt(index_dir, "has passages out of page order")
    first, end = data.passage_span_first, data.passage_span_end
    if len(first) != nq or len(end) != nq or (nq and (first.min() < 0 or end.max() > ns or (end < first).any())):
        raise _corrupt(index_dir, "has a passage-to-span map that does not match its spans")
    problem = data.lines.problem(np_, nt)
    if problem is not None:
        raise _corrupt(index_dir, f"has {problem}")


def check_matches(data: IndexData, pages: Sequence[PageVersion], corpus_version: str,
                  fingerprint: str, index_dir: Path) -> None:
    """IndexCorruptError when the index was built from another corpus or configuration."""
    if data.corpus_version != corpus_version:
        raise _corrupt(index_dir, f"was built from corpus {data.corpus_version}, the store now holds {corpus_version}")
    if data.fingerprint != fingerprint:
        raise _corrupt(index_dir, "was built with other analyzer or passage settings")
    keys = [(p.url, p.version, p.content_hash) for p in pages]
    if keys != data.page_keys:
        raise _corrupt(index_dir, "lists other pages than the store")
