"""Judging a model's reply before anything of it reaches a patient.

A weak or overloaded model answers, but not always with an answer. A reply is unusable
(a `Problem`, and the chatbot answers with extract instead) when it:
- repeats itself: a sentence or line said twice, or a phrase looping three times running;
- echoes the prompt: the 参考情報: / 質問: scaffolding, or a sentence of the instructions;
- pastes the reference back instead of summarising it;
- runs far over the length asked (answer_chars x summary_max_factor), or was cut at
  max_tokens, or its stream ended before the model said it had finished;
- is in another language than the question (a Japanese question answered in English,
  Chinese or Indonesian, or with foreign words that neither the question nor the
  reference holds).
The same checks run on a reply while it streams in (`stop_reading`), so that a loop is
cut off after a few repetitions instead of running to max_tokens; the whole reply is
judged once more when it is complete. All comparisons are on NFKC text without spaces
and punctuation (`squash`).
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

from .generate import split_sentences, squash

# A unit shorter than this (squashed) may recur in a real answer (「手術」, 「はい」).
REPEAT_MIN_CHARS = 6
# A phrase of at least LOOP_MIN_CHARS looping this many times in a row, however short the
# lines: 「病期（正岡分類）病期（正岡分類）病期（正岡分類）」.
LOOP_MIN_CHARS = 4
LOOP_TIMES = 3
LOOP_MAX_CHARS = 120
# Instructions' sentences at least this long count as echoed when they reappear.
ECHO_MIN_CHARS = 10
# The reference pasted back: this share of a reply's 20-character shingles found verbatim
# in the reference, over a reply of at least PASTE_MIN_CHARS.
PASTE_SHARE = 0.85
PASTE_MIN_CHARS = 200
_SHINGLE, _SHINGLE_STEP = 20, 10
# A Japanese question's answer: at least this share of its letters Japanese, kana among
# them (Chinese has none), and no Latin word this long that the question and reference lack.
JAPANESE_MIN_SHARE = 0.5
KANA_MIN_SHARE = 0.05
FOREIGN_WORD_CHARS = 5

_SCAFFOLD = re.compile(r"(?:^|\n)\s*[【「]?(?:参考情報|質問)[】」]?\s*[:：]")
_LATIN_WORD = re.compile(r"[A-Za-z]{%d,}" % FOREIGN_WORD_CHARS)
_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class Problem:
    """Why a reply cannot be shown: a code for machines, a reason for people."""

    code: str  # repeated | echo | pasted | too_long | cut_off | language | no_line | empty
    reason: str


def has_japanese(text: str) -> bool:
    return bool(_KANA.search(text) or _HAN.search(text))


def repetition(text: str) -> Problem | None:
    """A sentence or line said twice, or a phrase looping LOOP_TIMES times in a row."""
    units = [squash(u) for u in split_sentences(text)]
    counts = Counter(u for u in units if len(u) >= REPEAT_MIN_CHARS)
    if counts:
        unit, times = counts.most_common(1)[0]
        if times >= 2:
            return Problem("repeated", f"the reply repeats 「{_clip(unit)}」 ({times} times)")
    loop = _loop(squash(text))
    if loop is not None:
        unit, times = loop
        return Problem("repeated", f"the reply loops on 「{_clip(unit)}」 ({times} times in a row)")
    return None


def _loop(flat: str) -> tuple[str, int] | None:
    """The first phrase of LOOP_MIN_CHARS..LOOP_MAX_CHARS repeated LOOP_TIMES times running."""
    n = len(flat)
    for size in range(LOOP_MIN_CHARS, min(LOOP_MAX_CHARS, n // LOOP_TIMES) + 1):
        for start in range(0, n - size * LOOP_TIMES + 1):
            unit = flat[start:start + size]
            if flat.startswith(unit * LOOP_TIMES, start):
                times = LOOP_TIMES
                while flat.startswith(unit, start + size * times):
                    times += 1
                return unit, times
    return None


def _tail_loop(flat: str) -> tuple[str, int] | None:
    """A phrase looping at the end of the text so far (cheap: while a reply streams)."""
    n = len(flat)
    for size in range(LOOP_MIN_CHARS, min(LOOP_MAX_CHARS, n // LOOP_TIMES) + 1):
        unit = flat[n - size:]
        if flat.endswith(unit * LOOP_TIMES):
            return unit, LOOP_TIMES
    return None


def echo(text: str, instructions: Iterable[str] = ()) -> Problem | None:
    """The prompt's scaffolding (参考情報: / 質問:) or a sentence of its instructions."""
    norm = unicodedata.normalize("NFKC", text)
    m = _SCAFFOLD.search(norm)
    if m:
        return Problem("echo", f"the reply echoes the prompt ({m.group().strip()!r})")
    flat = squash(norm)
    for instruction in instructions:
        for sentence in re.split(r"(?<=[。！？])", instruction):
            s = squash(sentence)
            if len(s) >= ECHO_MIN_CHARS and s in flat:
                return Problem("echo", f"the reply echoes the instructions (「{_clip(s)}」)")
    return None


def pasted(text: str, reference: str) -> Problem | None:
    """The reference copied back rather than summarised."""
    flat, ref = squash(text), squash(reference)
    if len(flat) < PASTE_MIN_CHARS or not ref:
        return None
    shingles = [flat[i:i + _SHINGLE] for i in range(0, len(flat) - _SHINGLE + 1, _SHINGLE_STEP)]
    share = sum(s in ref for s in shingles) / len(shingles)
    if share >= PASTE_SHARE:
        return Problem("pasted", f"the reply copies the reference back ({share:.0%} of it verbatim)")
    return None


def language(text: str, question: str, reference: str = "") -> Problem | None:
    """A Japanese question answered in another language, or with foreign words."""
    if not has_japanese(question):
        return None  # Latin script alone does not say which language: no judgement
    norm = unicodedata.normalize("NFKC", text)
    letters = [ch for ch in norm if ch.isalpha()]
    if not letters:
        return None
    kana, han = len(_KANA.findall(norm)), len(_HAN.findall(norm))
    share = (kana + han) / len(letters)
    if share < JAPANESE_MIN_SHARE:
        return Problem("language", f"the reply is not in Japanese like the question ({share:.0%} Japanese)")
    if han >= 20 and kana < KANA_MIN_SHARE * (kana + han):
        return Problem("language", "the reply reads as Chinese, not Japanese (almost no kana)")
    known = unicodedata.normalize("NFKC", question + "\n" + reference).lower()
    foreign = [w for w in _LATIN_WORD.findall(norm) if w.lower() not in known]
    if foreign:
        return Problem("language", f"the reply has words in another language ({', '.join(dict.fromkeys(foreign[:3]))})")
    return None


def generated_problem(
    reply: str,
    *,
    question: str,
    reference: str,
    instructions: Iterable[str],
    max_chars: int,
    finish_reason: str | None,
    streamed: bool,
) -> Problem | None:
    """The first reason a generated summary cannot be shown, or None."""
    text = reply.strip()
    if not text:
        return Problem("empty", "the reply is empty")
    for check in (
        lambda: repetition(text),
        lambda: echo(text, instructions),
        lambda: pasted(text, reference),
        lambda: too_long(text, max_chars),
        lambda: language(text, question, reference),
    ):
        problem = check()
        if problem is not None:
            return problem
    return cut_off(finish_reason, streamed)


def too_long(text: str, max_chars: int) -> Problem | None:
    if len(text) > max_chars:
        return Problem("too_long", f"the reply runs to {len(text)} characters, far over the length asked "
                                   f"(at most {max_chars})")
    return None


def cut_off(finish_reason: str | None, streamed: bool) -> Problem | None:
    """A reply that did not end because the model was done."""
    if finish_reason == "length":
        return Problem("cut_off", "the reply was cut at max_tokens before the model finished")
    if streamed and finish_reason is None:
        return Problem(
            "cut_off",
            "the reply stream ended before the model said it had finished (a llama-cpp-python server "
            "cuts a stream when another request arrives: start it with --interrupt_requests False, "
            "or set GUIDERAG_MODEL_CONCURRENCY=1)",
        )
    return None


def stop_reading(
    *, question: str, instructions: Iterable[str], max_chars: int
) -> Callable[[str], str | None]:
    """A `stop_when` for a streaming summary: the reason to stop reading, or None.

    Only checks that a longer reply cannot undo (a repetition, an echo, the length), and
    only at sentence ends and every 32 characters, so the cost stays small."""
    instructions = tuple(instructions)
    seen = {"checked": 0}

    def check(text: str) -> str | None:
        if len(text) > max_chars:
            return f"over {max_chars} characters"
        at_end = text.endswith(("。", "！", "？", "!", "?", "\n"))
        if not at_end and len(text) - seen["checked"] < 32:
            return None
        seen["checked"] = len(text)
        done = text if at_end else text[: max(text.rfind("。"), text.rfind("\n")) + 1]
        problem = echo(text, instructions) or (repetition(done) if done else None)
        if problem is None:
            loop = _tail_loop(squash(text))
            if loop is not None:
                return f"loops on 「{_clip(loop[0])}」"
        return problem.reason if problem is not None else None

    return check


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
