"""The library: every guideline of the store, a question routed to one, then asked there.

`Library(config).ask(question, mode, guideline="auto")` (a BotConfig, chatbot.config) chooses the guideline
(chatbot.routing: one stored -> that one; an id -> that one; auto -> by the offline
evidence, or by a topic-selection call when a model is configured), then answers with that
guideline's `Chatbot`, unchanged: the answer, its refusal and its audit row are exactly
what one guideline alone gives, plus `guideline` and `routing`. Retrievers are loaded
once per guideline, on first use, and shared by every ask, and so is each guideline's
evidence gate (chatbot.gate): routing measures a guideline's evidence with the very gate
its answers are judged by.

A Library may answer from several threads at once (the API, the chat's sessions): every
ask writes its audit row through its thread's own store connection (chatbot.stores) unless
it is given one (`store=`, one thread's own), the retrievers and their stored line
analyses are read-only, and loading a retriever is done once under a lock. A process keeps its
loaded libraries in chatbot.library_cache, keyed on the store's state.
"""
from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Sequence

from guiderag.errors import InputError, ModelError
from guiderag.guideline import AUTO_GUIDELINE, DEFAULT_GUIDELINE, GuidelineScope
from guiderag.scopes import StoreConfig
from guiderag.store import Guideline, Store
from guiderag.store.pages import store_exists

from . import routing as rt
from .answer import Answer
from .bot import Chatbot
from .config import BotConfig
from .conversation import Reader, Reading, clean_history
from .gate import EvidenceGate
from .llm import LLMClient, Progress
from .question import clean_question
from .stores import thread_stores

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever


class Library:
    """The store's guidelines with a retriever each; `ask` routes, then answers."""

    def __init__(
        self,
        config: BotConfig,
        *,
        retrievers: dict[str, Retriever] | None = None,
        llm: LLMClient | None = None,
        store: Store | None = None,
    ) -> None:
        """`store`: the connection the guidelines are read through (default: one of the
        Library's own, closed with it); asks open their own unless given one."""
        self.config = config
        self.llm = llm or LLMClient(config.model)
        self._own_store = store is None
        self._store: Store | None = store or Store(config.store.store, create=False)
        self._store_pid = os.getpid()
        self._closed = False
        counts = self.store.page_counts()
        # The guidelines that can answer: live, with live pages, in id order.
        self.guidelines: list[Guideline] = [g for g in self.store.guidelines() if counts.get(g.id)]
        self._retrievers: dict[str, Retriever] = dict(retrievers or {})
        self._gates: dict[str, EvidenceGate] = {}
        self._loading = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------
    @property
    def store(self) -> Store:
        """The connection the guidelines are read through: the one given, else the Library's
        own, opened again in a forked process (a connection is never used across fork:
        SQLite forbids it) or after `release`."""
        held = self._store
        if self._own_store and not self._closed and (held is None or self._store_pid != os.getpid()):
            held = self._store = Store(self.config.store.store, create=False)
            self._store_pid = os.getpid()
        assert held is not None
        return held

    def release(self) -> None:
        """Close the Library's own connection; it is opened again when next needed (before
        a fork: each worker process opens its own)."""
        held = self._store
        if self._own_store and held is not None and self._store_pid == os.getpid():
            self._store = None
            held.close()

    def close(self) -> None:
        """Close the Library's own store connection (asks in flight have their own)."""
        if self._own_store:
            self._closed = True
            if self._store is not None and self._store_pid == os.getpid():
                self._store.close()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the guidelines -------------------------------------------------------------
    @property
    def ids(self) -> list[str]:
        return [g.id for g in self.guidelines]

    def ref(self, gid: str) -> dict[str, str]:
        """{"id", "title"} of a guideline, as answers carry it."""
        title = next((g.title for g in self.guidelines if g.id == gid), "")
        return {"id": gid, "title": title}

    def retriever(self, gid: str) -> Retriever:
        """The retriever of one guideline, loaded on first use (its index rebuilt if stale)."""
        retriever = self._retrievers.get(gid)
        if retriever is not None:
            return retriever
        with self._loading:
            if gid not in self._retrievers:
                from guiderag.retrieval import load_retriever  # MeCab, numpy: only when asked

                self._retrievers[gid] = load_retriever(self.config.retrieval, self.config.store,
                                                        GuidelineScope.of(self.config.store, gid),
                                                        progress=self.config.progress)
            return self._retrievers[gid]

    def gate(self, gid: str) -> EvidenceGate:
        """The evidence gate of one guideline (over its retriever), made on first use and
        shared by routing and by every answer from that guideline."""
        gate = self._gates.get(gid)
        if gate is not None:
            return gate
        retriever = self.retriever(gid)
        with self._loading:
            if gid not in self._gates:
                self._gates[gid] = EvidenceGate(self.config.answer, retriever)
            return self._gates[gid]

    def loaded(self) -> list[Retriever]:
        """The retrievers loaded so far."""
        return list(self._retrievers.values())

    def check_requested(self, requested: str | None) -> str:
        """"auto", or a stored guideline's id; InputError for any other name."""
        name = (requested or "").strip() or self.config.store.guideline or AUTO_GUIDELINE
        if name == AUTO_GUIDELINE or name in self.ids:
            return name
        if not self.guidelines and name == DEFAULT_GUIDELINE:
            return name
        held = ", ".join(self.ids) or "none yet"
        raise InputError(f"no guideline {name!r} in the store {self.config.store.store_name} (it holds: {held}); "
                         "use --guideline ID with one of those, or auto")

    # -- routing --------------------------------------------------------------------
    def route(self, question: str, requested: str | None = None, *, store: Store | None = None) -> rt.Routing:
        """Which guideline answers `question` (already cleaned), and how it was chosen.
        `store`: the calling thread's connection the calibrations are read through (else
        the library's own, for a caller on one thread)."""
        name = self.check_requested(requested)
        if name != AUTO_GUIDELINE:
            return rt.Routing(requested=name, chosen=name, method=rt.FIXED)
        if len(self.guidelines) <= 1:
            only = self.ids[0] if self.guidelines else (self.config.store.guideline or DEFAULT_GUIDELINE)
            return rt.Routing(requested=name, chosen=only, method=rt.ONLY)
        evidence = [self.evidence(gid, question, store=store) for gid in self.ids]
        chosen, governed = rt.offline_choice(evidence)
        routing = rt.Routing(requested=name, chosen=chosen, method=rt.OFFLINE, governed=governed,
                             evidence=evidence)
        if self.llm.configured("keywords"):
            self._ask_model(question, routing)
        return routing

    def evidence(self, gid: str, question: str, *, store: Store | None = None) -> rt.Evidence:
        """One guideline's retrieval evidence for a question (offline keywords), judged by
        that guideline's own evidence gate: its coverage model (its calibration, read from
        the store now), or under the rules as far as the threshold and the line coverage go
        (chatbot.gate: the asked-figure rule is the answer's alone)."""
        result = self.retriever(gid).search(question, None)
        verdict = self.gate(gid).judge(question, result, asked_figure=False, store=store or self.store)
        p = verdict.coverage.probability if verdict.coverage is not None else None
        return rt.Evidence(gid, float(result.top_score), verdict.measures.line_coverage, verdict.covered, p)

    def route_follow_up(self, question: str, history: Sequence[str], *,
                        store: Store | None = None) -> tuple[rt.Routing, Reading] | None:
        """A conversation stays with its guideline: the one the latest earlier question that
        some guideline governs on its own is routed to (offline). When that guideline reads
        `question` (cleaned) as leaning on the earlier ones (chatbot.conversation: carried
        terms, or its own words finding the earlier topic's page), it answers it; else None
        (the question carries a topic of its own: routed alone)."""
        for earlier in reversed(history):
            chosen, governed = rt.offline_choice([self.evidence(gid, earlier, store=store) for gid in self.ids])
            if not governed:
                continue
            reading = self.reader(chosen, store=store).read(question, history)
            if not (reading.carried or reading.same_topic):
                return None
            return rt.Routing(requested=AUTO_GUIDELINE, chosen=chosen, method=rt.CONVERSATION, governed=True,
                              conversation=earlier), reading
        return None

    def reader(self, gid: str, *, store: Store | None = None) -> Reader:
        """How one guideline reads a question of a conversation (chatbot.conversation);
        `store`: the calling thread's connection its calibration is read through."""
        return Reader(self.config.answer, self.retriever(gid), self.gate(gid), store or self.store)

    def _ask_model(self, question: str, routing: rt.Routing) -> None:
        """The topic-selection call; its choice replaces the offline one only when it is
        one of the stored ids."""
        routing.model = self.llm.model_for("keywords")
        system, user = rt.topic_prompt(question, [(g.id, g.title) for g in self.guidelines])
        try:
            # optional, like model keywords: a busy model is not waited for
            reply = self.llm.complete(system, user, role="keywords", temperature=rt.TOPIC_TEMPERATURE,
                                      max_tokens=rt.TOPIC_MAX_TOKENS, n=1,
                                      queue_timeout_s=self.config.model.keywords_queue_timeout_s)
        except ModelError as exc:
            routing.fell_back = f"the topic-selection call failed ({exc}); the offline choice stands"
            return
        routing.model_reply = reply[:200]
        choice = rt.parse_topic(reply, self.ids)
        if choice is None:
            routing.fell_back = (f"the model named no stored guideline ({reply.strip()[:60]!r}); "
                                 "the offline choice stands")
            return
        routing.method = rt.MODEL
        routing.chosen = choice
        routing.governed = next((e.governed for e in routing.evidence if e.guideline == choice), None)

    # -- asking ---------------------------------------------------------------------
    def ask(
        self, question: str, mode: str | None = None, guideline: str | None = None, *,
        progress: Progress | None = None, store: Store | None = None, history: Sequence[str] | None = None,
    ) -> Answer:
        """Route, then answer from the chosen guideline only (one audit row, as always);
        `progress` as for Chatbot.ask. `store`: the connection to write the audit row
        through (one the calling thread alone uses, e.g. an evaluation run's), else the
        calling thread's own (chatbot.stores: kept open between asks for an SQLite store).
        `history`: the conversation's earlier questions, oldest first (a follow-up is routed
        and answered as read with them)."""
        if store is None:
            with thread_stores(str(self.config.store.store)).use() as own:
                return self._ask(question, mode, guideline, progress, own, history)
        return self._ask(question, mode, guideline, progress, store, history)

    def _ask(self, question: str, mode: str | None, guideline: str | None, progress: Progress | None,
             store: Store, history: Sequence[str] | None) -> Answer:
        name = self.check_requested(guideline)
        reading: Reading | None = None
        if name == AUTO_GUIDELINE and len(self.guidelines) > 1:
            try:
                text = clean_question(question, self.config.answer).text
                earlier = clean_history(history, self.config.answer)
            except InputError:
                # the first guideline's chatbot records the refused question, as one alone would
                with self.chatbot(self.ids[0], None, store=store) as bot:
                    return bot.ask(question, mode, history=history)
            followed = self.route_follow_up(text, earlier, store=store) if earlier else None
            if followed is not None:
                routing, reading = followed
            else:
                routing = self.route(text, name, store=store)
        else:
            routing = self.route(question, name, store=store)
        with self.chatbot(routing.chosen, routing, store=store) as bot:
            if progress is None and history is None:
                return bot.ask(question, mode)
            return bot.ask(question, mode, progress=progress, history=history, reading=reading)

    def chatbot(self, gid: str, routing: rt.Routing | None, *, store: Store | None = None) -> Chatbot:
        """A fresh Chatbot (a new session) over one guideline, with the guideline's shared
        retriever and evidence gate, and `store`, else a store connection of its own (closed
        with it): asks on several threads never share one."""
        return Chatbot(self.config, retriever=self.retriever(gid), llm=self.llm, store=store,
                       guideline=self.ref(gid), routing=routing.to_json() if routing is not None else None,
                       gate=self.gate(gid))

    def corpus_versions(self) -> str:
        """The corpus version of each loaded guideline, for a results workbook's meta."""
        versions = {r.guideline: r.corpus_version for r in self._retrievers.values()}
        if len(versions) == 1:
            return next(iter(versions.values()))
        return "; ".join(f"{g}={v}" for g, v in sorted(versions.items()))


def guideline_titles(config: StoreConfig) -> Sequence[tuple[str, str]]:
    """(id, title) of the store's guidelines that hold pages (none when there is no store)."""
    if not store_exists(config.store):
        return []
    with Store(config.store, create=False) as store:
        counts = store.page_counts()
        return [(g.id, g.title) for g in store.guidelines() if counts.get(g.id)]


__all__: Sequence[str] = ("Library", "guideline_titles")
