"""Reading a follow-up: a question read with the conversation's earlier questions.

Patients drop the topic once it is known: after 「胃がんの手術って、どんな種類があるんですか？」
the question 「入院はどれくらいになりそうですか？」 asks about the stay after that surgery.
The history is the conversation's earlier questions only (oldest first; the caller keeps
it: every ask is stateless), at most AnswerConfig.history_max_turns of them (the last ones),
each read as a question is (chatbot.question: cleaned, capped at max_question_chars).

How a question is read (`Reader.read`, offline, from the guideline's own statistics):
1. a question opening with a topic-switch marker (「話は変わりますが」「ところで」「ついでに
   聞きたいんですが」) starts a new topic: it is read on its own, exactly as asked alone;
   neither the marker nor a filler at its start (「あと、」「それと、」「あの、」) counts
   among the question's own words or topic (the question is still searched as typed);
2. the topic of the conversation is the topic terms (retrieval.topic: the content nouns the
   guideline knows, by weight) of the question that opened it, and of the follow-ups read
   with it; a question read on its own opens a new one;
3. a question that points back (こそあど: 「それって」「その場合」「そこの病院」「そうなったら」)
   or names no topic of its own (「いつから始めるんですか？」「副作用は？」) leans on the
   earlier ones: it is read with the topic, and with the terms of the question just before
   when it points back (「そう」 is what was just said);
4. any other question carries a topic of its own: it is read with the earlier topic only
   when that reading is covered (the evidence gate, and rule 5) and finds another page
   than the question alone does; else on its own, exactly as a standalone question: a
   topic switch is never dragged back, and no context is claimed where carrying changed
   nothing (the conversation's topic then goes on). A question whose own topic names a
   term of the conversation's topic again (「検査の費用っていくらくらいですか？」 after
   「気管支鏡の検査ってどんなことをするんですか？」: the test is that one) continues it: it
   is read with the rest of the topic even when that reading is not covered, and then
   refused (the guideline's page on costs, which its own words find alone, does not
   speak of that test); only where its own words find the same page alone is it read so;
5. safety: a question read with carried terms is answered only when the evidence gate
   covers it as completed AND the page that answers it speaks to both halves of it: to its
   own words (the question's own query slots find some of their mass in that page's title
   and lines: a follow-up's own words are mostly predicates and plain words 「家にいながら
   受けられる？」, which a page says in its own words, so one found is enough; none found,
   「車の運転はいつから？」 after questions on sport after surgery, is refused) and to the
   carried topic (the carried terms' slots find CARRIED_FOUND of their mass there: 「それっ
   て保険はききますか？」 after a question on tissue samples is not answered by the page on
   insurance that does not speak of them). Refused with the fixed refusal, as a standalone
   question would be; a question with no words of its own (「いつまでもらえるの？」) has
   nothing to check for the first half;
6. the page that answered the question before (as it was read, when the gate covered it) is
   the conversation's prior: read with carried terms, a follow-up's pages keep their order
   except that page, whose passages weigh PRIOR_BOOST more (it may move up among the pages
   found; the threshold and the gate judge what was found without it: 「手術でとることはできないんですか？」 after
   a question on recurrence stays on the recurrence page, which the completed question
   finds second).

Carried terms complete the question's query (retrieval's `context`): the question as read
is one query of its own slots and the carried terms' known slots, each carried term at
retrieval.pipeline_ours.CARRIED_WEIGHT of a word of its own; model keywords then only add
to it, as for any question. The answer says how the question was read (`context`:
the completed question, the earlier turns used, the carried terms), and the audit row
records the history with it. Nothing of the history is shown to a model, except to a
rewrite call (chatbot.rewrite) whose reply may only add keywords; history text can change
which passages are found, never what is shown as the guideline's words.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Sequence

from guiderag.errors import InputError, QuestionError
from guiderag.retrieval.result import RetrievalResult
from guiderag.scopes import PROTOCOL, AnswerConfig

from .extract import slot_overlap
from .question import clean_question

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever
    from guiderag.store import Store

    from .gate import EvidenceGate

# How many topic terms one question contributes (retrieval.topic): its heaviest nouns.
TOPIC_TERMS = 5
# Rule 5: the share of the carried terms' mass the answering page must hold. Measured
# (issue 21, all four conversation sets): 0.2 and 0.35 alike, 0.5 loses follow-ups whose
# carried topic is several turns' terms of which the page says some.
CARRIED_FOUND = 0.35
# Rule 6: how much more the passages of the page that answered the question before weigh
# in a follow-up's search. Measured (issue 21): 0.05-0.1 moved one gastric follow-up, 0.2
# two, with the transfer sets' right pages as before or better; 0.3 no further on gastric.
PRIOR_BOOST = 0.2

# A question opening like this starts a new topic (rule 1); matched on NFKC text.
_SWITCH = re.compile(
    r"^(?:(?:あと|それと|あの|じゃあ|では|ありがとうございます。?)[、,]?\s*)?"
    r"(?:話は(?:変わ|かわ)(?:ります|る|って)(?:が|けど|んですが|んですけど)?"
    r"|話は(?:それ|逸れ)(?:ます|る)(?:が|けど|んですが|んですけど)?"
    r"|別の(?:質問|話|こと)(?:です|なんです)?(?:が|けど)"
    r"|ところで|ついでに(?:[^、。,]{0,12}?(?:が|けど))?)[、,]?\s*")
# A filler opening a question: not searched, and no sign of a new topic.
_FILLER = re.compile(r"^(?:あと|それと|あの|えっと|えーと|じゃあ|じゃ|では|それじゃ)[、,]\s*")
# Words pointing back to what was said (rule 3): こそあど, not the fixed expressions
# 「これから」「これまで」「それから」 (from now on, so far, and then).
_POINTS_BACK = re.compile(
    r"(?:それ(?!から)|その|そこ|そちら|そっち|そう(?:なっ|なる|いう|いっ|した|する|だと|なら|すると|です)"
    r"|あれ|あそこ|これ(?!から|まで)|この|ここ|こう(?:いう|いっ|なっ|なる)|こちら|こっち)")

# What a patient is shown of how a follow-up was read: one quiet line above the answer
# (or the refusal), so a misreading can be seen; {phrase} is Reading.phrase().
CONTEXT_LINE = "前の質問の『{phrase}』についての質問として答えています"

STANDALONE = "standalone"  # no history, or read on its own
TOPIC_SWITCH = "topic_switch"  # a marker said so
FOLLOW_UP = "follow_up"  # read with carried terms


def check_history(history: Sequence[object] | None, config: AnswerConfig, max_chars: int | None = None) -> None:
    """InputError (naming the bound) for a history a caller may not send: not a list of
    texts, more than AnswerConfig.history_max_turns earlier questions, an empty one, or one
    longer than `max_chars`. The API answers it with 422 and writes no audit row."""
    if history is None:
        return
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise InputError("history must be a list of the conversation's earlier questions (texts), oldest first")
    limit = config.history_max_turns
    if len(history) > limit:
        raise InputError(f"history holds {len(history)} earlier questions; at most {limit} "
                         "(the last ones: GUIDERAG_HISTORY_MAX_TURNS)")
    for i, item in enumerate(history, start=1):
        if not isinstance(item, str):
            raise InputError(f"history item {i} must be text, not {type(item).__name__}")
        if not item.strip():
            raise InputError(f"history item {i} is empty: send the earlier questions as they were asked")
        if max_chars is not None and len(item) > max_chars:
            raise InputError(f"history item {i} is {len(item)} characters; at most {max_chars}")


def context_line(context: dict[str, Any] | None) -> str:
    """The line a patient reads above the answer to a follow-up ("" for a question alone)."""
    if not context or not context.get("phrase"):
        return ""
    return CONTEXT_LINE.format(phrase=context["phrase"])


def clean_history(history: Sequence[object] | None, config: AnswerConfig) -> tuple[str, ...]:
    """The earlier questions a follow-up is read with: each cleaned and capped as a question
    is (chatbot.question), the last AnswerConfig.history_max_turns of those with anything
    readable left (the others are dropped). InputError for a history that is not a list
    of texts."""
    if history is None:
        return ()
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise InputError("the history must be a list of the conversation's earlier questions (texts)")
    out: list[str] = []
    for item in reversed(list(history)):  # the last readable ones
        if len(out) >= config.history_max_turns:
            break
        if not isinstance(item, str):
            raise InputError(f"every earlier question of the history must be text, not {type(item).__name__}")
        try:
            out.append(clean_question(item, config).text)
        except QuestionError:
            continue
    return tuple(reversed(out))


@dataclass(frozen=True)
class Carried:
    """A topic term of an earlier question: as the patient wrote it, which turn (1-based),
    and its weight in that question (retrieval.topic)."""

    term: str
    turn: int
    weight: float = 1.0


@dataclass
class Reading:
    """How one question of a conversation is read (the answer's `context`)."""

    question: str  # as asked (cleaned)
    text: str  # what is searched: the question as typed (cleaned)
    history: tuple[str, ...] = ()
    how: str = STANDALONE
    carried: list[Carried] = field(default_factory=list)
    points_back: bool = False
    same_topic: bool = False  # read alone, but its own words found the earlier topic's page
    prior: str | None = None  # the url of the page that answered the question before (rule 6)

    @property
    def terms(self) -> list[str]:
        """The carried terms, as retrieval's `context`."""
        return [c.term for c in self.carried]

    @property
    def from_turns(self) -> list[int]:
        return sorted({c.turn for c in self.carried})

    def phrase(self) -> str:
        """The carried topic in the patient's words, for the line they read: around the
        heaviest carried term, the run of carried terms its earlier question says together
        (joined by nothing, の, と, や or ・: 「胃がんの手術」「IV期」), as written there."""
        if not self.carried:
            return ""
        head = max(self.carried, key=lambda c: c.weight)
        if not 0 < head.turn <= len(self.history):
            return head.term
        return _phrase(self.history[head.turn - 1], head.term, [c.term for c in self.carried if c.turn == head.turn])

    def context_json(self) -> dict[str, Any] | None:
        """The answer's `context`: None when nothing of the history was used."""
        if not self.carried:
            return None
        return {"completed_question": f"「{self.phrase()}」について：{self.text}",
                "from_turns": self.from_turns, "carried_terms": self.terms, "phrase": self.phrase()}

    def audit_json(self) -> dict[str, Any] | None:
        """What the audit row records of the conversation: the history and how it was read."""
        if not self.history:
            return None
        return {"history": list(self.history), "read_as": self.how, "context": self.context_json()}


# What may join two words of one topic phrase: 胃がん|の|手術, IV||期, 口|や|鼻.
_JOINERS = frozenset({"", "の", "と", "や", "・"})


def _phrase(question: str, head: str, terms: Sequence[str]) -> str:
    """The run of `terms` around `head` that `question` says together (see Reading.phrase)."""
    text = unicodedata.normalize("NFKC", question)
    spots = sorted((i, i + len(t)) for t in terms if (i := text.find(t)) >= 0)
    start = text.find(head)
    if start < 0:
        return head
    lo, hi = start, start + len(head)
    grown = True
    while grown:
        grown = False
        for a, b in spots:
            if a >= hi and text[hi:a] in _JOINERS:
                hi, grown = b, True
            elif b <= lo and text[b:lo] in _JOINERS:
                lo, grown = a, True
    return text[lo:hi]


def strip_opening(question: str) -> tuple[str, bool]:
    """The question without a topic-switch marker or a filler at its start (NFKC), and
    whether a topic-switch marker opened it: what the reader takes the question's own
    words and topic from (it is searched as typed)."""
    text = unicodedata.normalize("NFKC", question).strip()
    m = _SWITCH.match(text)
    if m and m.end() < len(text):
        return text[m.end():], True
    m = _FILLER.match(text)
    if m and m.end() < len(text):
        return text[m.end():], False
    return text, False


def points_back(text: str) -> bool:
    """Whether the question refers to what was said before (こそあど)."""
    return bool(_POINTS_BACK.search(text))


class Reader:
    """Reads questions of a conversation against one guideline (its retriever and gate)."""

    def __init__(self, config: AnswerConfig, retriever: Retriever, gate: EvidenceGate,
                 store: Store | None = None) -> None:
        """`store`: where the gate reads the guideline's coverage calibration."""
        self.config = config
        self.retriever = retriever
        self.gate = gate
        self.store = store

    def read(self, question: str, history: Sequence[str]) -> Reading:
        """How `question` (cleaned) is read after `history` (clean_history's). Earlier
        questions are read in turn, as they were when asked, to know the topic."""
        history = tuple(history)
        if not history or self.retriever.pipeline == PROTOCOL:
            return Reading(question, question, history)  # as a question alone, exactly
        topic: list[Carried] = []
        last: list[Carried] = []
        prior: str | None = None
        for turn, earlier in enumerate(history, start=1):
            reading = self._step(earlier, turn, topic, last, history[: turn - 1], prior)
            prior = self._answered_page(reading)
            own = [Carried(t.surface, turn, t.weight)
                   for t in self.retriever.topic_terms(strip_opening(reading.text)[0], TOPIC_TERMS)]
            if (reading.how == FOLLOW_UP and not reading.points_back) or reading.same_topic:
                topic = _merge(topic, own)  # a follow-up with a topic of its own adds to it
            elif reading.how != FOLLOW_UP and not reading.same_topic:
                topic = own  # read on its own: a new topic
            last = own
        reading = self._step(question, len(history) + 1, topic, last, history, prior)
        reading.history = history
        return reading

    def _answered_page(self, reading: Reading) -> str | None:
        """The page an earlier question was answered from, as it was read (rule 6), or
        None when it was refused."""
        found = self.retriever.search(reading.text, None, context=reading.terms)
        result = self.prefer(found, reading)
        if reading.carried:
            return _top(result) if self.covered(reading, found, result) else None
        return _top(result) if self.gate.judge(reading.text, found, store=self.store).covered else None

    def _step(self, question: str, turn: int, topic: list[Carried], last: list[Carried],
              before: tuple[str, ...], prior: str | None = None) -> Reading:
        text = question  # searched as typed, as a question alone is
        bare, switch = strip_opening(question)  # without a marker or filler: its own words
        if switch or not topic:
            return Reading(question, text, before, TOPIC_SWITCH if switch else STANDALONE)
        own = [t.surface for t in self.retriever.topic_terms(bare, TOPIC_TERMS)]
        back = points_back(bare)
        source = _merge(last, topic) if back else topic
        carried = [c for c in source if not any(c.term in o or o in c.term for o in own)]
        reading = Reading(question, text, before, FOLLOW_UP, carried, back, prior=prior)
        if not carried:
            reading.how = STANDALONE
            return reading
        continues = len(carried) < len(source)  # it names a term of the topic again (rule 4)
        if back or not own:
            return reading  # it leans on the earlier questions: read with them (rule 3)
        found = self.retriever.search(text, None, context=reading.terms)
        completed = self.prefer(found, reading)
        if not continues and not self.covered(reading, found, completed):
            return Reading(question, text, before, STANDALONE)  # rule 4: a topic of its own
        alone = self.retriever.search(text, None)
        if self.gate.judge(text, alone, store=self.store).covered and _top(alone) == _top(completed):
            # its own words find the page the earlier topic would: nothing to carry (no
            # context claimed), but the conversation's topic goes on
            return Reading(question, text, before, STANDALONE, same_topic=True)
        return reading  # rule 4: the completed reading is covered, and it is another page

    def covered(self, reading: Reading, found: RetrievalResult, answering: RetrievalResult | None = None) -> bool:
        """Whether a reading with carried terms is answered (rule 5): the gate covers what
        was `found`, and the page that answers (`answering`: `found` with the prior, rule 6;
        `found` when not given) speaks to its own words and its topic."""
        if not self.gate.judge(reading.text, found, store=self.store).covered:
            return False
        return self.speaks_to(reading, answering if answering is not None else found)

    def speaks_to(self, reading: Reading, result: RetrievalResult) -> bool:
        """Rule 5's page check: the page of the first passage holds some of the mass of the
        question's own slots (True when it has none) and CARRIED_FOUND of the carried
        terms' (True when nothing was carried). Off with AnswerConfig.min_line_coverage 0, as
        the gate's line check is."""
        if self.config.min_line_coverage <= 0 or not result.passages:
            return True
        slots = self.retriever.query_slots(strip_opening(reading.text)[0])
        own = slots[0] if slots else []
        carried = [slot for c in reading.carried for q in self.retriever.query_slots(c.term)[:1] for slot in q]
        page = self._page_terms(result)
        if sum(m for m, _ in own) > 0 and slot_overlap(own, page) <= 0:
            return False
        return sum(m for m, _ in carried) <= 0 or slot_overlap(carried, page) >= CARRIED_FOUND

    def _page_terms(self, result: RetrievalResult) -> set[str]:
        """The terms of the title and lines of the page of the first passage."""
        page = result.passages[0].page
        terms: set[str] = set()
        lines = self.gate.lines  # the lines' analyses stored with the index (retrieval.lines)
        for n, line in enumerate((page.title, *page.lines)):
            if line.strip():
                terms.update(lines.terms(page, n))
        return terms

    def prefer(self, result: RetrievalResult, reading: Reading) -> RetrievalResult:
        """`result` with the prior page's passages and candidacy weighing PRIOR_BOOST more,
        best first again (rule 6), for a reading with carried terms; otherwise `result`. Only
        pages already found move; whether anything cleared the threshold is unchanged, and
        the gate judges `result` as found (covered() and the chatbot)."""
        url = reading.prior
        if not reading.carried or url is None or not any(c.url == url for c in result.candidates):
            return result
        boost = 1.0 + PRIOR_BOOST
        candidates = sorted((c._replace(score=c.score * boost) if c.url == url else c for c in result.candidates),
                            key=lambda c: -c.score)
        passages = sorted((replace(p, score=p.score * boost) if p.page.url == url else p for p in result.passages),
                          key=lambda p: -p.score)
        return replace(result, candidates=candidates, passages=passages,
                       top_score=max(result.top_score, candidates[0].score))


def _top(result: RetrievalResult) -> str | None:
    return result.passages[0].page.url if result.passages else None


def _merge(first: Sequence[Carried], then: Sequence[Carried]) -> list[Carried]:
    """`first`, then the terms of `then` it lacks (a term once: its first turn)."""
    out = list(first)
    for c in then:
        if not any(c.term == o.term for o in out):
            out.append(c)
    return out
