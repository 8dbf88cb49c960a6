"""analyze_tokens' loop (the index build's hottest: fields by position, one-word runs put
out in the loop) gives what the plain loop it replaced gives, kept here as the reference,
on the bench corpus's tokens and on random token sequences of every kind."""
from __future__ import annotations

import random

import pytest

from guiderag.retrieval import analyzer
from guiderag.retrieval.analyzer import Analysis, analyze_tokens
from guiderag.retrieval.tokens import (ADVERBIAL, ASCII, NOUN, NOUN_KINDS, OTHER, PREFIX, PROPER, STOP_NOUNS,
                                       SUFFIX, SYNONYM, VERB, Term, Token)

_RUN_KINDS = frozenset({NOUN, PROPER, PREFIX, SUFFIX, SYNONYM})


def _reference(tokens: list[Token], *, parts: bool = True, verbs: bool = True,
               canonical_spans: bool = False) -> Analysis:
    result = Analysis()
    terms, spans = result.terms, result.spans
    run: list[Token] = []
    after_stop = False

    def flush() -> None:
        if len(run) == 1 and run[0].kind in NOUN_KINDS:
            tok = run[0]
            terms.append(Term(tok.form, tok.surface, tok.kind))
            spans.append(tok.form if canonical_spans and tok.kind == SYNONYM else tok.surface)
            return
        run_terms, surface = analyzer._run_terms(tuple(run), parts)
        terms.extend(run_terms)
        spans.append(surface)

    for tok in tokens:
        kind = tok.kind
        if kind in _RUN_KINDS:
            if tok.space_before and run:
                flush()
                run = []
            if not run and kind == SUFFIX and after_stop:
                continue
            after_stop = False
            run.append(tok)
            continue
        after_stop = kind == OTHER and tok.form in STOP_NOUNS
        if run:
            flush()
            run = []
        if kind == OTHER:
            continue
        if kind == ASCII:
            terms.append(Term(tok.form, tok.surface, ASCII))
            spans.append(tok.form)
        elif kind == ADVERBIAL:
            terms.append(Term(tok.form, tok.surface, NOUN))
            spans.append(tok.surface)
        elif kind == VERB and verbs:
            terms.append(Term(tok.form, tok.surface, VERB))
    if run:
        flush()
    return result


def _sequences() -> list[list[Token]]:
    from guiderag.retrieval.bench import generate_corpus
    from guiderag.retrieval.index import make_analyzer
    from guiderag.scopes import RetrievalConfig

    an = make_analyzer(RetrievalConfig())
    texts = [line for p in generate_corpus(30, 1).pages for line in (p.title, *p.lines)]
    texts += ["何人の患者が抗がん剤の副作用で何回入院", "PD-L1 陽性の肺がん、EGFR 遺伝子変異", "お薬を飲む方法", ""]
    out = [an.tokens(t) for t in texts]
    rng = random.Random(20261203)
    kinds = [NOUN, PROPER, PREFIX, SUFFIX, SYNONYM, ASCII, VERB, OTHER, ADVERBIAL]
    forms = ["肺", "がん", "何", "事", "人", "副", "作用", "egfr", "飲む", "毎日", "の"]
    for _ in range(3000):
        out.append([Token(f + str(rng.randint(0, 1)), rng.choice([f, f + "1"]), rng.choice(kinds), rng.random() < 0.2)
                    for f in rng.choices(forms, k=rng.randint(0, 10))])
    return out


@pytest.mark.parametrize("options", [{}, {"canonical_spans": True}, {"parts": False, "verbs": False}])
def test_analyze_tokens_equals_the_plain_loop(options: dict) -> None:
    for tokens in _sequences():
        got, want = analyze_tokens(tokens, **options), _reference(tokens, **options)
        assert got.terms == want.terms and got.spans == want.spans, tokens
        assert all(type(t) is Term for t in got.terms)
