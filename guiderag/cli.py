"""The `guiderag` console script: argument parsing and error handling only.

Each command's work lives in the package of its pipeline stage (`guiderag.<stage>.commands`),
or in guiderag.commands when it spans stages, imported lazily so that `guiderag pages`
does not load MeCab or scikit-learn.
Exit codes (../shared/CONTRACT.md): 0 success, 2 bad usage or input, 1 other failure, and
for `check` 3 when the site diverged from the store (or the corpus is too old).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .errors import GuideragError
from .redact import RedactingStream, redact
from .registry import Setting
from .settings import AUTO_GUIDELINE, BY_NAME, MODES, PIPELINES, REGISTRY, Settings, ignored_variables
from .streams import pipe_safe_streams

# command -> (module, function); each function is `(args, settings) -> int`.
COMMANDS: dict[str, tuple[str, str]] = {
    "scrape": ("guiderag.commands", "run_scrape"),
    "pages": ("guiderag.scraper.commands", "run_pages"),
    "index": ("guiderag.retrieval.commands", "run_index"),
    "bench": ("guiderag.retrieval.commands", "run_bench"),
    "ask": ("guiderag.chatbot.commands", "run_ask"),
    "audit": ("guiderag.chatbot.commands", "run_audit"),
    "gaps": ("guiderag.chatbot.commands", "run_gaps"),
    "eval": ("guiderag.eval.commands", "run_eval"),
    "devbench": ("guiderag.eval.commands", "run_devbench"),
    "calibrate": ("guiderag.eval.commands", "run_calibrate"),
    "chat": ("guiderag.commands", "run_chat"),
    "guidelines": ("guiderag.commands", "run_guidelines"),
    "check": ("guiderag.scraper.commands", "run_check"),
    "serve": ("guiderag.api.commands", "run_serve"),
    "loadbench": ("guiderag.api.commands", "run_loadbench"),
    "config": ("guiderag.commands", "run_config"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line reason (as the contract asks)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"guiderag: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _flag_type(s: Setting) -> Callable[[str], object]:
    """argparse's type for a setting's flag: the registry's parsing, its error as argparse's."""
    def parse(raw: str) -> object:
        try:
            value = s.parse(raw, "the value")
            s.check(value, "the value")
        except GuideragError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value
    parse.__name__ = s.type_name  # what argparse's "invalid <type> value" names
    return parse


def add_setting_flag(parser: argparse.ArgumentParser, name: str, **kwargs: object) -> None:
    """The flag of a setting that maps one to one: its type and help from the registry."""
    s = BY_NAME[name]
    assert s.flag is not None and s.spec.flag_help, name
    kwargs.setdefault("help", f"{s.help} (default: ${s.env}, else {s.default_text()})")
    if "choices" not in kwargs:
        kwargs["type"] = _flag_type(s)
    parser.add_argument(s.flag, **kwargs)  # type: ignore[arg-type]


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    add_setting_flag(common, "db")
    add_setting_flag(common, "pipeline", choices=PIPELINES)
    add_setting_flag(common, "threshold")
    common.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    parser = _Parser(prog="guiderag", description="Answer questions from a clinical guideline, in its own words.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("scrape", parents=[common], help="harvest, classify, fetch and store the guideline pages")
    p.add_argument("toc_url", nargs="?", help="URL of the table-of-contents page")
    p.add_argument("--sample", action="store_true", help="scrape the bundled sample guideline from a loopback server")
    add_setting_flag(p, "urls_xlsx")
    add_setting_flag(p, "delay_s")
    p.add_argument("--no-index", action="store_true", help="do not rebuild the retrieval index afterwards")
    p.add_argument("--force", action="store_true", help="fetch every page in full (no conditional GET)")
    p.add_argument("--guideline", metavar="ID", help="store the site as this guideline (default: the store's default one)")
    p.add_argument("--title", help="the guideline's title (default: the title it has, else the TOC page's)")

    p = sub.add_parser("pages", parents=[common], help="list the stored content pages")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--all", action="store_true", help="include pages marked removed")
    p.add_argument("--guideline", metavar="ID", help="only this guideline's pages")

    p = sub.add_parser("index", parents=[common], help="(re)build the retrieval index from the stored corpus")
    p.add_argument("--guideline", metavar="ID", help="only this guideline's index (default: every guideline's)")

    p = sub.add_parser("guidelines", parents=[common], help="list the stored guidelines, or remove one")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--all", action="store_true", help="include removed guidelines")
    p.add_argument("--remove", metavar="ID", help="remove this guideline: its pages are marked removed, its "
                   "index deleted; the audit log is kept")

    p = sub.add_parser("check", parents=[common], help="compare the live site with the store, writing nothing "
                       "(exit 0 in sync, 3 diverged or too old, 1 failure)")
    p.add_argument("toc_url", nargs="?", help="table-of-contents URL (default: the one the guideline was scraped from)")
    p.add_argument("--guideline", metavar="ID", help="check this guideline (default: every guideline of the store)")
    add_setting_flag(p, "max_age_hours", metavar="HOURS")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")

    p = sub.add_parser("bench", parents=[common], help="retrieval speed benchmark on generated corpora")
    p.add_argument("--pages", default="100,1000,10000", help="corpus sizes, comma-separated")
    p.add_argument("--queries", type=int, default=200, help="queries per corpus size")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")

    p = sub.add_parser("ask", parents=[common], help="answer one question")
    p.add_argument("question")
    add_setting_flag(p, "mode", choices=MODES)
    p.add_argument("--json", action="store_true", help="print the answer object as JSON on stdout")
    p.add_argument("--guideline", metavar="ID|auto", help="answer from this guideline, or auto: the one "
                   "that governs the question (default)")
    p.add_argument("--history", action="append", metavar="EARLIER_QUESTION", default=None,
                   help="an earlier question of the conversation (repeat it, oldest first): a follow-up is "
                   "read with them")

    p = sub.add_parser("audit", parents=[common], help="export the audit log")
    p.add_argument("--out", type=Path, required=True, help="workbook to write (.xlsx)")

    p = sub.add_parser("gaps", parents=[common], help="list the questions the guideline did not cover, with counts")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("eval", parents=[common], help="run a question set and write a scored workbook")
    p.add_argument("questions", type=Path, nargs="?", help="QUESTIONS.xlsx")
    p.add_argument("--out", type=Path, help="RESULTS.xlsx")
    add_setting_flag(p, "mode", choices=MODES)
    p.add_argument("--compare", type=Path, nargs=2, metavar=("A.xlsx", "B.xlsx"), help="paired-bootstrap comparison of two result workbooks")
    p.add_argument("--guideline", metavar="ID|auto", help="answer every question from this guideline, or auto (default)")
    p.add_argument("--json", action="store_true", help="print the summary (or the comparison) as JSON on stdout")

    p = sub.add_parser("devbench", parents=[common], help="the dev benchmarks (JSQuAD, patient-worded, its PDF edition, conversations): build or serve, scrape, evaluate, print the tables and refusal curves")
    p.add_argument("--modes", default="extract", help="answer modes, comma-separated (lines/generate need a model)")
    p.add_argument("--pipelines", default="protocol,ours", help="retrieval pipelines, comma-separated")
    p.add_argument("--bench-dir", type=Path, help="JSQuAD folder (default: ../shared/bench/jsquad-v1.3)")
    p.add_argument("--limit", type=int, help="at most this many questions (for a quick look)")
    p.add_argument("--workdir", type=Path, help="where the site, store and workbooks go (default: a temporary folder)")
    p.add_argument("--suite", choices=("jsquad", "patient", "pdf", "conversation", "all", "coverage"), default="all",
                   help="which benchmark: JSQuAD, the patient-worded gastric set, its PDF edition "
                        "(beside the HTML one), the multi-turn conversations (with history and alone), "
                        "or all (default); coverage: the coverage model's "
                        "leave-one-site-out, shipped and ablation tables over every labelled site")
    p.add_argument("--write-model", type=Path, help="coverage suite: write the shipped models (JSON) here, "
                   "e.g. data/coverage_model.json")
    p.add_argument("--no-ablation", action="store_true", help="coverage suite: skip the ablation table")
    p.add_argument("--patient-dir", type=Path, help="patient benchmark folder (default: ../shared/bench/patient-gastric)")
    p.add_argument("--conversation-dir", type=Path,
                   help="conversation benchmark folder (default: ../shared/bench/conversation-gastric)")
    p.add_argument("--pdf-dir", type=Path, help="PDF benchmark folder (default: ../shared/bench/pdf-gastric)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("calibrate", parents=[common], help="fit a guideline's coverage decision (when to refuse) "
                       "to labelled questions, store it, print the answered/refused curve")
    p.add_argument("questions", type=Path, nargs="?", help="QUESTIONS.xlsx: question, kind (in_scope / "
                   "out_of_scope), optional category, id, gold_answers")
    p.add_argument("--guideline", metavar="ID", help="the guideline to calibrate (default: the store's only one)")
    p.add_argument("--target-refusal", type=float, default=0.95,
                   help="the share of out-of-scope questions to refuse (default 0.95)")
    p.add_argument("--out", type=Path, help="CURVE.xlsx to write (and CURVE.png beside it)")
    p.add_argument("--json", action="store_true", help="print the fit and the curve as JSON on stdout")
    p.add_argument("--reset", action="store_true", help="delete the guideline's calibration: the shipped model "
                   "applies again")

    p = sub.add_parser("serve", parents=[common], help="the HTTP API (POST /v1/ask, GET /v1/pages, /healthz, /readyz)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")

    p = sub.add_parser("loadbench", parents=[common], help="concurrent clients against 1 and 2 API replicas")
    p.add_argument("--clients", type=int, default=16, help="concurrent client threads (default 16)")
    p.add_argument("--requests", type=int, default=320, help="requests per run, at most (default 320)")
    p.add_argument("--seconds", type=float, default=120.0, help="seconds per run, at most (default 120)")
    p.add_argument("--replicas", default="1,2", help="replica counts, comma-separated (default 1,2)")
    p.add_argument("--pg", help="also bench this PostgreSQL store (postgresql://...), scraped already")
    p.add_argument("--sqlite", type=Path, help="the SQLite store to bench (default: the sample, scraped anew)")
    p.add_argument("--workdir", type=Path, help="where logs and the scraped sample go (default: a temporary folder)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("chat", parents=[common], help="serve the chat page (Streamlit) on the bundled sample or --db")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")

    p = sub.add_parser("config", parents=[common], help="every setting: its value and where it came from "
                       "(default, environment, flag), its environment variable and help; secrets masked")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print {\"settings\": [...]} as JSON on stdout")
    out.add_argument("--markdown", action="store_true", help="print the settings reference (docs/settings.md) "
                     "as generated from the registry")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """CLI flags over environment over defaults: every registered setting's flag the
    command has. A switch (--force, --no-progress) sets its boolean to the opposite of
    the default; --guideline auto means no fixed guideline, whatever the environment says."""
    overrides: dict[str, Any] = {}
    for s in REGISTRY:
        if s.flag is None:
            continue
        value = getattr(args, s.flag.lstrip("-").replace("-", "_"), None)
        if isinstance(value, bool) and s.kind is bool:
            if value:
                overrides[s.name] = not s.default
        elif value is not None:
            overrides[s.name] = "" if s.name == "guideline" and value == AUTO_GUIDELINE else value
    return Settings.load(**overrides)


SIGTERM_EXIT = 128 + signal.SIGTERM
SIGINT_EXIT = 128 + signal.SIGINT


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM ends a command as Ctrl-C does: its clean-up runs (the run is marked aborted,
    temporary files go, partial results are written) instead of the process just vanishing."""
    raise KeyboardInterrupt("SIGTERM")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _redacted_stderr() -> Iterator[None]:
    """Everything this command writes to stderr (messages, warnings, log lines, a
    traceback) with the credentials of every URL in it masked (guiderag.redact)."""
    previous = sys.stderr
    sys.stderr = RedactingStream(previous)
    try:
        yield
    finally:
        sys.stderr = previous


def main(argv: Sequence[str] | None = None) -> int:
    with pipe_safe_streams(), _redacted_stderr(), _sigterm_as_interrupt():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_args(args)
        for warning in ignored_variables():
            print(f"guiderag: warning: {warning}", file=sys.stderr)
        from guiderag.store.connection import configure as configure_store

        configure_store(settings)  # every PostgreSQL store this command opens: pool size, bounded waits
        module_name, func_name = COMMANDS[args.command]
        func: Callable[[argparse.Namespace, Settings], int] = getattr(
            importlib.import_module(module_name), func_name
        )
        return int(func(args, settings) or 0)
    except GuideragError as exc:
        print(f"guiderag: error: {redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        terminated = str(exc) == "SIGTERM"
        print("guiderag: interrupted" + (" (SIGTERM)" if terminated else ""), file=sys.stderr)
        return SIGTERM_EXIT if terminated else SIGINT_EXIT
    except BrokenPipeError:
        # Output went to a closed pipe outside sys.stdout/sys.stderr and stopped the command
        # part-way: not a success.
        return 1
    except Exception:
        # A bug of ours: the traceback, as Python would print it, but through the redacting
        # stderr (a URL in an exception's message keeps its password out of it).
        traceback.print_exc(file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
