"""The chat page for patients and families, in Streamlit: `streamlit run app.py` (or `guiderag chat`).

The conversation is kept per browser session (Streamlit's session state): each question is
read with this patient's earlier questions (a follow-up 「入院はどれくらい？」 after a question
on surgery; chatbot.conversation), and the answer says so in one quiet line; 「新しい質問を
はじめる」 clears it. No chat history reaches an answer model. The answer shows
the guideline's own words as quoted passages with their page, fetch date and version. On a
first start with an empty store, the bundled sample guideline is scraped from a loopback
server and indexed (guiderag.ui.bootstrap). GUIDERAG_DB points the app at another store.
Only this module talks to Streamlit; what it shows is built by guiderag.ui.render.
"""
from __future__ import annotations

import threading

import streamlit as st

from guiderag.errors import GuideragError, InputError
from guiderag.redact import redact_logging
from guiderag.settings import AUTO_GUIDELINE, EXTRACT, MODEL_MODES, Settings
from guiderag.store.connection import configure as configure_store

# Absolute imports: `guiderag chat` hands this very file to `streamlit run`, which runs it
# as __main__, outside its package.
from guiderag.ui.bootstrap import StoreStatus, ensure_corpus, needs_bootstrap, store_status
from guiderag.ui.render import (
    answer_html,
    available_modes,
    error_details,
    guidelines_html,
    is_sample_site,
    progress_html,
    question_html,
    sidebar_html,
    warning_text,
)
from guiderag.ui.session import INDEX_LOCK, Activity, Turn, ask, earlier_questions, retriever_loaded
from guiderag.ui.text import CSS, MODE_LABELS, TEXT


def render_turn(turn: Turn, settings: Settings) -> None:
    with st.chat_message("user"):
        st.markdown(question_html(turn.question), unsafe_allow_html=True)
    with st.chat_message("assistant"):
        render_reply(turn, settings)


def render_reply(turn: Turn, settings: Settings) -> None:
    if turn.error_kind == "model":
        st.error(TEXT["model_error"])
    elif turn.error_kind == "question":
        st.warning(TEXT["bad_question"])
    elif turn.error_kind == "app":
        st.error(TEXT["app_error"])
    if turn.error_detail:
        st.markdown(turn.error_detail, unsafe_allow_html=True)
    if turn.answer is not None:
        st.markdown(answer_html(turn.answer, settings, turn.pages), unsafe_allow_html=True)


# How often the progress line (stage and elapsed seconds) is redrawn while an answer runs.
PROGRESS_TICK_S = 0.5


def answer_with_progress(
    question: str, mode: str, settings: Settings, status: StoreStatus, guideline: str | None = None,
    history: list[str] | None = None,
) -> Turn:
    """Answer in a worker thread; meanwhile show what it is doing and for how long.

    The model's text itself is not streamed to the screen: whether it may be shown at all
    (declined, repeated, echoed, far too long, another language) is known only once it is
    complete, and a patient must not read a sentence that is then taken back."""
    activity = Activity(stage="searching" if retriever_loaded(settings, status) else "loading")
    done: dict[str, Turn] = {}

    def work() -> None:
        done["turn"] = ask(question, mode, settings, guideline=guideline, activity=activity, history=history or [])

    worker = threading.Thread(target=work, name="guiderag-answer", daemon=True)
    box = st.empty()
    worker.start()
    while worker.is_alive():
        box.markdown(progress_html(activity.stage, activity.elapsed_s, activity.chars), unsafe_allow_html=True)
        worker.join(PROGRESS_TICK_S)
    box.empty()
    return done.get("turn") or Turn(question=question, error_kind="app")


# --- page sections -------------------------------------------------------------------------
def prepare_corpus(settings: Settings) -> None:
    """First run: build the sample guideline with a progress indicator; stop on failure."""
    if not needs_bootstrap(settings):
        return
    with st.status(TEXT["setup_running"], expanded=True) as status_box:
        bar = st.progress(0.0, text=TEXT["setup_running"])

        def report(fraction: float, message: str) -> None:
            bar.progress(min(max(fraction, 0.0), 1.0), text=message)

        try:
            with INDEX_LOCK:  # one index build at a time in this process
                result = ensure_corpus(settings, report)
        except GuideragError as exc:
            status_box.update(label=TEXT["setup_failed"], state="error", expanded=True)
            st.error(TEXT["setup_failed"])
            st.markdown(error_details(exc), unsafe_allow_html=True)
            st.stop()
        status_box.update(
            label=TEXT["setup_done"].format(pages=result.pages), state="complete", expanded=False
        )


def sidebar(settings: Settings, status: StoreStatus) -> tuple[str, str]:
    """Draw the sidebar; return the chosen answer mode and guideline ("auto": routed)."""
    guideline = AUTO_GUIDELINE
    with st.sidebar:
        for g in status.warnings:
            st.warning(warning_text(g, settings))
        if len(status.guidelines) > 1:
            st.subheader(TEXT["sidebar_guidelines"].format(count=len(status.guidelines)))
            st.markdown(guidelines_html(status, settings), unsafe_allow_html=True)
            labels = {AUTO_GUIDELINE: TEXT["choose_auto"], **{g.id: g.label for g in status.guidelines}}
            guideline = st.selectbox(TEXT["sidebar_choose"], list(labels), format_func=labels.__getitem__,
                                     key="guideline")
        else:
            st.subheader(TEXT["sidebar_guideline"])
            st.markdown(sidebar_html(status, settings), unsafe_allow_html=True)
        if any(is_sample_site(g.toc_url, settings) for g in status.guidelines) or (
                not status.guidelines and is_sample_site(status.toc_url, settings)):
            st.caption(TEXT["sidebar_sample_note"])
        st.subheader(TEXT["sidebar_mode"])
        modes = available_modes(settings)
        if len(modes) == 1:
            mode = EXTRACT
            st.caption(TEXT["sidebar_mode_extract_only"])
        else:
            default = settings.answer.mode if settings.answer.mode in modes else EXTRACT
            mode = st.radio(
                TEXT["sidebar_mode"],
                modes,
                index=modes.index(default),
                format_func=MODE_LABELS.__getitem__,
                key="mode",
                label_visibility="collapsed",
            )
        if st.button(TEXT["sidebar_clear"], key="clear"):
            st.session_state["history"] = []
        st.divider()
        st.caption(TEXT["disclaimer"])
    return mode, guideline


def main() -> None:
    redact_logging()  # what this process logs on stderr (an answer's failure) names no credential
    st.set_page_config(page_title=TEXT["page_title"], page_icon="📘", layout="centered")
    st.markdown(CSS, unsafe_allow_html=True)
    try:
        settings = Settings.load()
    except InputError as exc:
        st.error(TEXT["settings_error"])
        st.markdown(error_details(exc), unsafe_allow_html=True)
        st.stop()
    configure_store(settings.storage)  # a PostgreSQL store's pool size and bounded waits

    st.title(TEXT["title"])
    st.caption(TEXT["intro"])
    try:
        prepare_corpus(settings)
        status = store_status(settings)
    except GuideragError as exc:
        st.error(TEXT["app_error"])
        st.markdown(error_details(exc), unsafe_allow_html=True)
        st.stop()
    mode, guideline = sidebar(settings, status)
    if status.empty:
        st.info(TEXT["no_guideline"])
        st.stop()

    history: list[Turn] = st.session_state.setdefault("history", [])
    for turn in history:
        render_turn(turn, settings)

    # No max_chars: the chatbot answers the first part of a long question and says so.
    question = st.chat_input(TEXT["placeholder"])
    if question is None:
        return
    if not question.strip():
        with st.chat_message("assistant"):
            st.info(TEXT["empty_question"])
        return
    with st.chat_message("user"):
        st.markdown(question_html(question), unsafe_allow_html=True)
    with st.chat_message("assistant"):
        # Model time or an index to load takes seconds: show what is happening and for how
        # long (a keywords model is asked in every mode). An extract answer without any
        # model takes milliseconds: answered directly, nothing to show.
        keywords_model = bool(settings.model.keywords_model and (settings.model.openai_api_key or settings.model.openai_base_url))
        earlier = earlier_questions(history, settings)  # this session's own turns only
        if mode in MODEL_MODES or keywords_model or not retriever_loaded(settings, status):
            turn = answer_with_progress(question, mode, settings, status, guideline, earlier)
        else:
            turn = ask(question, mode, settings, guideline=guideline, history=earlier)
        render_reply(turn, settings)
    history.append(turn)


if __name__ == "__main__":
    main()
