"""Scrape runs: begun, committed in one transaction, failed or aborted, and listed.

A scrape of one guideline reads and writes only that guideline's pages: another
guideline's pages, versions and index are never touched. A run is committed whole
(`commit_run`: the guideline, every fetched page, the pages gone, the run's counts) or not
at all, so a failure half-way leaves the last good corpus.
"""
from __future__ import annotations

from typing import Any, Iterable

from guiderag.clock import utc_now
from guiderag.errors import StoreError
from guiderag.redact import redact
from guiderag.guideline import DEFAULT_GUIDELINE, check_guideline_id

from .connection import restate
from .records import FetchedPage, RunSummary
from .versions import PageVersions


class ScrapeRuns(PageVersions):
    """The runs table, and a run's commit into the pages (a part of store.pages.Store)."""

    # -- reading ----------------------------------------------------------------------
    def runs(self, guideline: str | None = None) -> list[dict]:
        """Every scrape run (of one guideline, or of all), newest first."""
        if guideline is None:
            return [dict(r) for r in self.conn.execute("SELECT * FROM runs ORDER BY id DESC")]
        return [dict(r) for r in self.conn.execute(
            f"SELECT * FROM runs WHERE guideline_id = {self.conn.param} ORDER BY id DESC", (guideline,))]

    def last_run(self, *, status: str | None = "ok", guideline: str | None = None) -> dict | None:
        """The newest run with that status (None: any), of one guideline or of all."""
        p = self.conn.param
        where, params = [], []
        if status:
            where.append(f"status = {p}")
            params.append(status)
        if guideline is not None:
            where.append(f"guideline_id = {p}")
            params.append(guideline)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT 1"
        row = self.conn.execute(sql, params).fetchone()
        return dict(row) if row else None

    def get_run(self, run_id: int) -> dict | None:
        """One run by its id, or None."""
        row = self.conn.execute(f"SELECT * FROM runs WHERE id = {self.conn.param}", (run_id,)).fetchone()
        return dict(row) if row else None

    # -- writing ----------------------------------------------------------------------
    def begin_run(self, toc_url: str, *, guideline: str = DEFAULT_GUIDELINE) -> int:
        """Record that a scrape of `guideline` started (committed at once, so aborted runs
        are visible)."""
        check_guideline_id(guideline)
        p = self.conn.param
        with self.conn.transaction():
            return self.conn.insert(
                f"INSERT INTO runs(toc_url, started_at, status, guideline_id) VALUES ({p}, {p}, 'running', {p})",
                (redact(toc_url), utc_now(), guideline),
            )

    def fail_run(self, run_id: int, message: str, *, status: str = "failed") -> None:
        """Mark a run failed or aborted; the corpus is not touched."""
        p = self.conn.param
        with self.conn.transaction():
            self.conn.execute(
                f"UPDATE runs SET status = {p}, finished_at = {p}, message = {p} WHERE id = {p}",
                (status, utc_now(), redact(message), run_id),
            )

    def abort_unfinished_runs(self, message: str) -> list[int]:
        """Mark every run still `running` aborted; returns their ids.

        Call only while holding the scrape lock (store.lock.scrape_lock): every run is
        begun under it, so a run still `running` then is one whose process died (SIGTERM,
        kill -9, a power cut) before it could say so."""
        p = self.conn.param
        with self.conn.transaction():
            ids = [int(r[0]) for r in self.conn.execute("SELECT id FROM runs WHERE status = 'running'")]
            if ids:
                self.conn.execute(
                    f"UPDATE runs SET status = 'aborted', finished_at = {p}, message = {p} WHERE status = 'running'",
                    (utc_now(), redact(message)),
                )
        return ids

    def commit_run(
        self,
        run_id: int,
        fetched: Iterable[FetchedPage],
        *,
        content_urls: Iterable[str],
        failed: dict[str, str] | None = None,
        gone: Iterable[str] = (),
        title: str | None = None,
    ) -> RunSummary:
        """Apply one scrape of the run's guideline in a single transaction.

        fetched: pages fetched (or found not modified) in this run.
        content_urls: every URL classified as content this run; the guideline's live pages
            outside it disappeared from the table of contents and are marked removed.
        failed: URL -> reason for pages that could not be fetched; their previous
            version (if any) stays current.
        gone: URLs the server says no longer exist (404 / 410): marked removed.
        title: the guideline's title (None: keep the one it has).
        Other guidelines' pages are never read or written; a fetched page another live
        guideline holds is a StoreError (the scraper refuses such a scrape before fetching).
        """
        failed = dict(failed or {})
        summary = RunSummary(run_id=run_id, failed=dict(failed))
        now = utc_now()
        content = set(content_urls)
        gone = set(gone)
        run = self.get_run(run_id)
        if run is None:
            raise StoreError(f"no scrape run {run_id} in {self.path} to commit")
        gid = str(run["guideline_id"])
        try:
            with self.conn.transaction():
                self._commit(run_id, run, fetched, content, failed, gone, title, now, summary, gid)
        except self.conn.errors as exc:
            # The transaction was rolled back: the previous corpus is intact.
            try:
                self.fail_run(run_id, f"store write failed: {exc}")
            except self.conn.errors:
                pass
            raise restate(self.conn.failure(exc), f"could not write the scrape to {self.path}; the previous "
                                                  "corpus is unchanged") from exc
        return summary

    def _commit(self, run_id: int, run: dict[str, Any], fetched: Iterable[FetchedPage], content: set[str],
                failed: dict[str, str], gone: set[str], title: str | None, now: str, summary: RunSummary,
                gid: str) -> None:
        """commit_run's writes, inside its transaction."""
        p = self.conn.param
        keep_title = {} if title is None else {"title": "excluded.title"}
        self.conn.upsert("guidelines", {"id": gid, "title": title or "", "toc_url": run["toc_url"], "created_at": now},
                         key=("id",), update={"toc_url": "excluded.toc_url", "removed_at": "NULL", **keep_title})
        for page in fetched:
            self._apply_fetched(page, run_id, now, summary, gid)
        live = self.conn.execute(
            f"SELECT id, url FROM pages WHERE removed_at IS NULL AND guideline_id = {p}", (gid,)).fetchall()
        for row in live:
            if row["url"] in gone or (row["url"] not in content and row["url"] not in failed):
                self.conn.execute(f"UPDATE pages SET removed_at = {p} WHERE id = {p}", (now, row["id"]))
                summary.removed.append(row["url"])
                summary.failed.pop(row["url"], None)
        c = summary.counts()
        self.conn.execute(
            f"UPDATE runs SET status = 'ok', finished_at = {p}, added = {p}, changed = {p}, "
            f"unchanged = {p}, removed = {p}, failed = {p} WHERE id = {p}",
            (now, c["added"], c["changed"], c["unchanged"], c["removed"], c["failed"], run_id),
        )

