"""The model client against a loopback OpenAI-compatible server, through the real `openai` client."""
from __future__ import annotations

import pytest

from guiderag.chatbot.llm import LLMClient
from guiderag.errors import InputError, ModelError, ModelNotConfiguredError
from guiderag.settings import Settings
from openai_stub import OpenAIStub, Reply
from chatbot_helpers import stub_settings


def test_complete_sends_the_protocol_request_and_returns_the_text():
    with OpenAIStub(["胸腺腫の治療は手術が中心です。"]) as stub:
        llm = LLMClient(stub_settings(stub).model)
        text = llm.complete("システム", "参考情報: x\n質問: y", temperature=0.1, max_tokens=1024, n=1)
        assert text == "胸腺腫の治療は手術が中心です。"
        (req,) = stub.requests
        assert req["model"] == "stub-answer"
        assert req["messages"] == [
            {"role": "system", "content": "システム"},
            {"role": "user", "content": "参考情報: x\n質問: y"},
        ]
        assert (req["temperature"], req["max_tokens"], req["n"]) == (0.1, 1024, 1)
        assert stub.headers[0]["authorization"] == "Bearer test-key"


def test_each_role_uses_its_own_model():
    with OpenAIStub(["a", "b"]) as stub:
        llm = LLMClient(stub_settings(stub, keywords_model="stub-keywords").model)
        llm.complete(None, "q", role="keywords")
        llm.complete("s", "q", role="answer")
        assert [r["model"] for r in stub.requests] == ["stub-keywords", "stub-answer"]
        assert stub.requests[0]["messages"] == [{"role": "user", "content": "q"}]


def test_local_server_without_api_key_still_works():
    with OpenAIStub(["ok"]) as stub:
        settings = stub_settings(stub, openai_api_key=None)
        assert settings.model.openai_api_key is None
        assert LLMClient(settings.model).complete("s", "u") == "ok"


def test_http_500_is_a_model_error_after_the_configured_retries():
    with OpenAIStub([Reply(status=500), Reply(status=500)]) as stub:
        llm = LLMClient(stub_settings(stub, model_retries=1).model)
        with pytest.raises(ModelError, match="HTTP 500"):
            llm.complete("s", "u")
        assert stub.calls == 2  # first try + one retry


def test_a_retry_that_succeeds_returns_the_reply():
    with OpenAIStub([Reply(status=500), "行: 3"]) as stub:
        assert LLMClient(stub_settings(stub, model_retries=1).model).complete("s", "u") == "行: 3"


def test_timeout_is_a_model_error_naming_the_limit():
    with OpenAIStub([Reply("late", delay_s=5)]) as stub:
        llm = LLMClient(stub_settings(stub, model_timeout_s=0.3).model)
        with pytest.raises(ModelError, match=r"did not answer within 0.3 s"):
            llm.complete("s", "u")


def test_unreachable_server_is_a_model_error():
    with OpenAIStub() as stub:
        settings = stub_settings(stub)
    # the stub is closed now: nothing listens on that port
    with pytest.raises(ModelError, match="cannot reach"):
        LLMClient(settings.model).complete("s", "u")


@pytest.mark.parametrize("reply", [Reply(None), Reply("   \n")])
def test_empty_reply_is_a_model_error(reply):
    with OpenAIStub([reply]) as stub:
        with pytest.raises(ModelError, match="empty reply"):
            LLMClient(stub_settings(stub).model).complete("s", "u")


def test_not_json_reply_is_a_model_error():
    with OpenAIStub([Reply(body="<html>proxy error</html>")]) as stub:
        with pytest.raises(ModelError):
            LLMClient(stub_settings(stub).model).complete("s", "u")


def test_wrong_key_is_reported_with_a_hint():
    with OpenAIStub([Reply(status=401)]) as stub:
        with pytest.raises(ModelError, match="OPENAI_API_KEY"):
            LLMClient(stub_settings(stub).model).complete("s", "u")


def test_missing_model_or_endpoint_is_an_input_error():
    with pytest.raises(ModelNotConfiguredError, match="GUIDERAG_ANSWER_MODEL") as exc:
        LLMClient(Settings.load(env={}, openai_api_key="k").model).complete("s", "u")
    assert isinstance(exc.value, InputError)
    with pytest.raises(ModelNotConfiguredError, match="OPENAI_BASE_URL"):
        LLMClient(Settings.load(env={}, answer_model="m").model).complete("s", "u")
    assert not LLMClient(Settings.load(env={}, answer_model="m").model).configured()


def test_stub_says_when_its_script_ran_out():
    with OpenAIStub(["one"]) as stub:
        llm = LLMClient(stub_settings(stub).model)
        assert llm.complete("s", "u") == "one"
        with pytest.raises(ModelError, match="no scripted reply left"):
            llm.complete("s", "u")


def test_a_streamed_reply_is_the_same_text_and_can_be_stopped():
    reply = "胸腺腫の治療は手術が中心です。" * 3
    with OpenAIStub([reply, reply, Reply(reply, finish_reason="length")]) as stub:
        llm = LLMClient(stub_settings(stub).model)
        seen: list[tuple[str, int]] = []
        whole = llm.chat("s", "u", stream=True, progress=lambda stage, chars: seen.append((stage, chars)))
        assert (whole.text, whole.finish_reason, whole.stopped, whole.streamed) == (reply, "stop", None, True)
        assert seen[-1] == ("writing", len(reply)) and [c for _, c in seen] == sorted(c for _, c in seen)
        cut = llm.chat("s", "u", stream=True, stop_when=lambda text: "enough" if "。" in text else None)
        assert cut.stopped == "enough" and cut.finish_reason == "stopped" and cut.text.startswith("胸腺腫")
        assert len(cut.text) < len(reply)
        assert llm.chat("s", "u", stream=True).finish_reason == "length"
        assert [r.get("stream") for r in stub.requests] == [True, True, True]


def test_a_busy_slot_is_a_model_busy_error_after_the_queue_timeout():
    import threading
    import time

    from guiderag.errors import ModelBusyError

    gate = threading.Event()
    with OpenAIStub([Reply("first", gate=gate, delay_s=10), "second"]) as stub:
        settings = stub_settings(stub, model_concurrency=1, model_timeout_s=15.0)
        first = threading.Thread(target=lambda: LLMClient(settings.model).complete("s", "u"))
        first.start()
        while stub.calls == 0:
            time.sleep(0.01)
        with pytest.raises(ModelBusyError, match="stayed busy"):
            LLMClient(settings.model).chat("s", "u", queue_timeout_s=0.2)
        gate.set()
        first.join()
        assert LLMClient(settings.model).complete("s", "u") == "second"  # the slot is free again
