"""JSQuAD v1.3 as a dev benchmark: articles -> a guidebook-like site + in/out-of-scope questions.

JSQuAD (JGLUE) is Japanese reading comprehension over Wikipedia articles. We lay the
articles out as a web guidebook (one page per article), hold about a fifth of the
articles back (their questions become out of scope: the site cannot answer them), and
keep every gold answer string so that retrieval and answers can be scored.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import urljoin

from guiderag.errors import InputError
from guiderag.resources import shared_bench_dir
from guiderag.settings import Settings

from .site_builder import ARTICLE_DIR, SitePage, write_site
from .workbook import IN_SCOPE, OUT_OF_SCOPE, Question

BENCH_NAME = "jsquad-v1.3"
# The benchmark's definition: the share of articles kept off the site (their questions are
# the out-of-scope set) and the salt of the deterministic split and sample. Constants, not
# settings: another value is another benchmark, whose numbers compare with no earlier run.
HELD_OUT = 0.2
SEED = "guiderag-devbench-1"
DEFAULT_FILE = "valid-v1.3.json"
SEP = " [SEP] "


@dataclass(frozen=True)
class QA:
    """One question with all its gold answer strings; `paragraph_index` into the article."""

    id: str
    question: str
    answers: list[str]
    paragraph_index: int


@dataclass
class Article:
    """One JSQuAD article: title, paragraph texts (without the title prefix), questions."""

    title: str
    paragraphs: list[str]
    qas: list[QA] = field(default_factory=list)
    article_id: str = ""

    @property
    def display_title(self) -> str:
        """The title as a reader sees it (Wikipedia writes spaces as underscores)."""
        return self.title.replace("_", " ")

    @property
    def path(self) -> str:
        """Where the article's page lives, relative to the site root."""
        return f"{ARTICLE_DIR}/{self.article_id or _digest(self.title)[:12]}.html"


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def default_path(settings: Settings | None = None) -> Path:
    """The JSQuAD validation file: settings.eval.jsquad_dir, else ../shared/bench/jsquad-v1.3."""
    folder = settings.eval.jsquad_dir if settings and settings.eval.jsquad_dir else shared_bench_dir() / BENCH_NAME
    return Path(folder) / DEFAULT_FILE


def load_articles(path: Path | None = None, settings: Settings | None = None) -> list[Article]:
    """Read a JSQuAD (SQuAD v1.1-style) file; `path` may be the file or its folder."""
    path = Path(path) if path else default_path(settings)
    if path.is_dir():
        path = path / DEFAULT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(
            f"JSQuAD file not found: {path} (pass --bench-dir, or set GUIDERAG_JSQUAD_DIR)"
        ) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read JSQuAD file {path}: {exc}") from exc
    articles: list[Article] = []
    try:
        for entry in data["data"]:
            title = entry["title"]
            article = Article(title=title, paragraphs=[])
            for p_index, para in enumerate(entry["paragraphs"]):
                context = para["context"]
                prefix = title + SEP
                if context.startswith(prefix):
                    context = context[len(prefix):]
                elif SEP in context:
                    context = context.split(SEP, 1)[1]
                article.paragraphs.append(context)
                for qa in para.get("qas", []):
                    if qa.get("is_impossible"):
                        continue
                    answers = [a["text"] for a in qa.get("answers", []) if a.get("text")]
                    article.qas.append(QA(qa["id"], qa["question"], answers, p_index))
            ids = [qa.id for qa in article.qas]
            # JSQuAD ids look like a10336p0q0: the part before "p" names the article.
            if ids and "p" in ids[0]:
                article.article_id = ids[0].split("p", 1)[0]
            articles.append(article)
    except (KeyError, TypeError) as exc:
        raise InputError(f"{path} is not in SQuAD v1.1 format (missing {exc})") from exc
    return articles


def split_articles(
    articles: Sequence[Article],
    held_out: float = HELD_OUT,
    seed: str = SEED,
) -> tuple[list[Article], list[Article]]:
    """Deterministic split into (in_scope, held_out): order by sha1(seed + title).

    The first round(n * held_out) articles in that order are held back. The returned
    lists keep the input order.
    """
    if not 0.0 <= held_out < 1.0:
        raise InputError(f"held-out share must be in [0, 1), not {held_out}")
    order = sorted(articles, key=lambda a: _digest(seed + "\0" + a.title))
    n_out = round(len(articles) * held_out)
    out_titles = {a.title for a in order[:n_out]}
    inside = [a for a in articles if a.title not in out_titles]
    outside = [a for a in articles if a.title in out_titles]
    return inside, outside


def build_site(in_scope_articles: Sequence[Article], out_dir: Path) -> str:
    """Write the guidebook-like site of the in-scope articles; return the TOC path (relative)."""
    pages = [SitePage(a.path, a.display_title, tuple(a.paragraphs)) for a in in_scope_articles]
    return write_site(pages, Path(out_dir))


def questions(
    in_scope: Sequence[Article], held_out: Sequence[Article], base_url: str = ""
) -> list[Question]:
    """Every question: in-scope ones (gold URL, gold answers) then the held-out articles' ones.

    With `base_url` empty the gold URL is the page path relative to the site root, which
    matches the page wherever the site is served (see metrics.same_page).
    """
    out: list[Question] = []
    for article in in_scope:
        gold_url = urljoin(base_url, article.path) if base_url else article.path
        for qa in article.qas:
            out.append(
                Question(
                    id=qa.id,
                    question=qa.question,
                    kind=IN_SCOPE,
                    reference_answer=qa.answers[0] if qa.answers else None,
                    gold_url=gold_url,
                    gold_answers=_unique(qa.answers),
                )
            )
    for article in held_out:
        for qa in article.qas:
            out.append(Question(id=qa.id, question=qa.question, kind=OUT_OF_SCOPE))
    return out


def sample(items: Sequence[Question], n: int, seed: str = SEED) -> list[Question]:
    """A deterministic sample of n questions, stratified by kind, in the input order.

    Each kind gets its share of n (at least one question of each kind present when
    n >= 2); within a kind, questions are taken in the order of sha1(seed + id).
    """
    if n <= 0 or n >= len(items):
        return list(items)
    kinds: dict[str, list[Question]] = {}
    for q in items:
        kinds.setdefault(q.kind, []).append(q)
    quota = {k: round(n * len(v) / len(items)) for k, v in kinds.items()}
    if n >= len(kinds):
        for k in quota:
            quota[k] = max(1, quota[k])
    while sum(quota.values()) > n:  # rounding overshoot: trim the largest share
        k = max(quota, key=lambda key: quota[key])
        quota[k] -= 1
    while sum(quota.values()) < n:
        k = max(quota, key=lambda key: len(kinds[key]) - quota[key])
        quota[k] += 1
    keep: set[str] = set()
    for k, group in kinds.items():
        ranked = sorted(group, key=lambda q: _digest(seed + "\0" + q.id))
        keep.update(q.id for q in ranked[: quota[k]])
    return [q for q in items if q.id in keep]


def _unique(values: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


def article_of(question_id: str) -> str:
    """The article a JSQuAD question id belongs to (a10336p0q0 -> a10336)."""
    return question_id.split("p", 1)[0]
