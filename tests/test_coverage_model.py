"""The coverage model (issue 20), with real MeCab and a real store of the bundled sample.

- the shipped model file loads without scikit-learn and reproduces, on the sample site's
  question sets, the in-sample numbers written beside it when it was fitted;
- its dot product is scikit-learn's logistic regression (a reference implementation);
- a question naming a disease the guideline never mentions is refused, and the reasons
  name the word; a lay question whose words reach the guideline only through the patient
  table is answered (and refused with the table switched off);
- the answer object carries coverage_probability and coverage_reasons, as the contract says.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from guiderag.chatbot.config import BotConfig
from guiderag.chatbot import Library
from guiderag.chatbot.coverage_model import FORMAT, QA, CoverageModel, load_file, shipped, shipped_path
from guiderag.settings import Settings

LEUKEMIA = "白血病の骨髄移植について教えて"
HAIR = "髪が抜けるのはいつ頃ですか"  # 髪が抜ける -> 脱毛: the patient table only


@pytest.fixture(scope="module")
def sample(scraped_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's sample store: the asks here write audit rows."""
    from storekit import copy_store

    return copy_store(scraped_sample, tmp_path_factory.mktemp("coverage-sample") / "guide.db")


def _settings(db: Path, **changes: object) -> Settings:
    return Settings.load(env={}, db=str(db), progress=False, **changes)


def _ask(db: Path, question: str, **changes: object) -> dict:
    with Library(BotConfig.of(_settings(db, **changes))) as library:
        return library.ask(question).to_json()


def test_the_shipped_file_is_plain_json_and_loads(tmp_path: Path) -> None:
    data = json.loads(shipped_path().read_text(encoding="utf-8"))
    assert data["format"] == FORMAT
    models = shipped()
    assert set(models.forms) == {"qa", "article"}
    qa = models.for_form(QA)
    assert len(qa.features) == len(qa.coef) == len(qa.mean) == len(qa.scale)
    assert 0.0 < qa.operating_point < 1.0
    # written back, read again: the same model (what `calibrate` stores is this JSON too)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(models.to_json()), encoding="utf-8")
    assert load_file(path).for_form(QA) == qa
    assert CoverageModel.from_json(qa.to_json()) == qa


def test_the_dot_product_is_scikit_learns_logistic_regression() -> None:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from guiderag.eval import coverage_train

    rng = np.random.default_rng(7)
    names = ["a", "b", "c"]
    records = []
    for i in range(200):
        x = rng.normal(size=3)
        records.append({"site": "s" + str(i % 2), "in_scope": bool(x[0] + 0.5 * x[1] - x[2] + rng.normal() > 0),
                        "features": dict(zip(names, map(float, x))), "threshold": {"gold": True, "shown": True}})
    model = coverage_train.fit(records, names, labels="scope")
    X = np.asarray([[r["features"][n] for n in names] for r in records])
    Z = (X - np.asarray(model.mean)) / np.asarray(model.scale)
    lr = LogisticRegression()
    lr.coef_ = np.asarray([model.coef])
    lr.intercept_ = np.asarray([model.intercept])
    lr.classes_ = np.asarray([0, 1])
    expected = lr.predict_proba(Z)[:, 1]
    got = [model.probability(r["features"]) for r in records]
    assert max(abs(a - b) for a, b in zip(got, expected)) < 1e-12


def test_the_shipped_model_reproduces_its_reported_numbers_on_the_sample(scraped_sample: Path) -> None:
    """The sample's question sets, measured again on a fresh scrape, decided by the shipped
    model: exactly the in-sample shares recorded in the model file's meta when it was fitted."""
    from guiderag import retrieval
    from guiderag.eval import coverage_train
    from guiderag.eval.coverage_data import collect_questions
    from guiderag.eval.coverage_sites import SAMPLE_IN, SAMPLE_OUT, Labelled
    from guiderag.eval.workbook import IN_SCOPE, read_questions
    from guiderag.resources import question_set

    settings = _settings(scraped_sample)
    questions = [Labelled(q, SAMPLE_IN if q.kind == IN_SCOPE else SAMPLE_OUT)
                 for name in ("sample_patient.xlsx", "protocol.xlsx") for q in read_questions(question_set(name))]
    records = collect_questions(retrieval.load_retriever(settings.retrieval, settings.storage), questions, settings, "sample")
    model = shipped().for_form(QA)
    got = coverage_train.score(records, coverage_train.decide(model, records))
    reported = shipped().meta["shipped"][QA]["sample"]
    for category in (SAMPLE_IN, SAMPLE_OUT):
        assert got[category].n == reported[category]["n"]
        assert math.isclose(got[category].answered, reported[category]["answered"], abs_tol=1e-4), category
    assert got[SAMPLE_IN].answered >= 0.92


def test_a_disease_the_guideline_never_mentions_is_refused_and_named(sample: Path) -> None:
    answer = _ask(sample, LEUKEMIA)
    assert answer["coverage"] == "not_governed"
    assert answer["coverage_probability"] < answer["retrieval"]["coverage_model"]["operating_point"]
    assert any("『白血病』" in reason and "出てこない" in reason for reason in answer["coverage_reasons"]), \
        answer["coverage_reasons"]
    assert answer["passages"] == [] and answer["summary"] is None  # a refusal shows no text of the guideline


# A small Q&A guidebook written for this test: the hair-loss page says 脱毛, never 髪が抜ける.
QA_PAGES = {
    f"http://guide.test/q{i}.html": (title, *lines) for i, (title, lines) in enumerate([
        ("Q1 薬物療法の副作用にはどのようなものがありますか？",
         ("主な副作用", "薬物療法では、吐き気、白血球の減少、口内炎、しびれなどが起こることがあります。")),
        ("Q2 脱毛はいつ始まり、いつ治まりますか？",
         ("脱毛の経過", "薬物療法による脱毛は、治療開始から2～3週間ほどで始まることが多いです。",
          "治療が終われば、多くの場合3～6か月でまた生えてきます。")),
        ("Q3 手術の前にどのような検査をしますか？",
         ("手術前の検査", "手術の前には、血液検査、心電図、呼吸機能検査などを行います。")),
        ("Q4 手術のあとはどのくらい入院しますか？",
         ("入院期間", "手術後の入院期間は、多くの場合1～2週間程度です。")),
        ("Q5 治療費の負担を軽くする制度はありますか？",
         ("高額療養費制度", "医療費の自己負担が上限額を超えた分は、高額療養費制度で払い戻されます。")),
        ("Q6 放射線治療はどのように受けますか？",
         ("放射線治療の流れ", "放射線治療は、平日に毎日、数週間かけて通院で受けることが多いです。")),
        ("Q7 血便が出たときはどうすればよいですか？",
         ("血便への対応", "血便が続くときは、自己判断せずに早めに医療機関を受診してください。")),
    ], 1)
}
# お尻から血 -> 血便: the patient table alone (the maintainer's synonyms do not join them)
LAY = "お尻から血が出たらどうすればいい？"


@pytest.fixture(scope="module")
def qa_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    from chatbot_helpers import indexed_settings

    return indexed_settings(Path(tmp_path_factory.mktemp("coverage-qa")), QA_PAGES)


def test_a_lay_question_reaching_the_guideline_through_the_patient_table_is_answered(qa_settings: Settings) -> None:
    with Library(BotConfig.of(qa_settings)) as library:
        answer = library.ask(LAY).to_json()
    assert answer["coverage"] == "governed", answer["coverage_reasons"]
    assert any(e["origin"] == "patient table" and e["target"] == "血便" for e in answer["retrieval"]["expansions"])
    assert "血便" in answer["answer"] and answer["passages"][0]["url"].endswith("q7.html")
    # the table switched off: お尻 is a word the guidebook never uses; refused
    with Library(BotConfig.of(qa_settings.replace(patient_table_weight=0.0))) as library:
        off = library.ask(LAY).to_json()
    assert off["coverage"] == "not_governed"
    assert off["coverage_probability"] < answer["coverage_probability"]


def test_the_rules_before_the_model_are_still_there(sample: Path) -> None:
    """coverage_decision=rules: the threshold and the evidence gate decide, no probability."""
    answer = _ask(sample, LEUKEMIA, coverage_decision="rules")
    assert answer["coverage"] == "not_governed"
    assert answer["coverage_probability"] is None and answer["coverage_reasons"]
    assert "coverage_model" not in answer["retrieval"]


@pytest.mark.parametrize("question", ["胸腺腫瘍にはどのような治療法がありますか？", "明日の東京の天気は？"])
def test_every_answer_says_its_probability_and_why(sample: Path, question: str) -> None:
    answer = _ask(sample, question)
    p = answer["coverage_probability"]
    assert isinstance(p, float) and 0.0 <= p <= 1.0
    assert answer["coverage_reasons"] and all(isinstance(r, str) and r for r in answer["coverage_reasons"])
    block = answer["retrieval"]["coverage_model"]
    assert block["source"] == "shipped" and block["form"] == QA
    assert (answer["coverage"] == "governed") == (p >= block["operating_point"])


def test_gaps_and_the_audit_row_record_the_probability_and_reasons(scraped_sample: Path, tmp_path: Path) -> None:
    from storekit import copy_store

    from guiderag.chatbot.audit import AuditLog
    from guiderag.store import Store

    db = copy_store(scraped_sample, tmp_path / "g.db")
    answer = _ask(db, LEUKEMIA)
    with Store(db, create=False) as store:
        log = AuditLog(store.conn)
        row = log.get(answer["audit_id"])
        assert row is not None
        recorded = json.loads(row["answer_json"])
        assert recorded["coverage_probability"] == answer["coverage_probability"]
        assert recorded["coverage_reasons"] == answer["coverage_reasons"]
        [gap] = [g for g in log.gaps() if "白血病" in g.question]
    assert gap.coverage_probability == answer["coverage_probability"]
    assert any("『白血病』" in r for r in gap.coverage_reasons)


CISPLATIN = "シスプラチンの点滴は1回何時間かかりますか"  # the sample's pages give months, never hours
COLON_SCREENING = "大腸がん検診は何歳から受けるべきですか"  # 大腸 is on one page of the lung sample, in no title


def test_a_figure_asked_in_a_unit_the_best_page_never_gives_is_refused_and_said(sample: Path) -> None:
    answer = _ask(sample, CISPLATIN)
    assert answer["coverage"] == "not_governed"
    assert answer["retrieval"]["coverage_model"]["features"]["unit_missing"] == 1.0
    assert any("「何時間」" in r and "単位の数字がない" in r for r in answer["coverage_reasons"]), answer["coverage_reasons"]
    assert answer["passages"] == [] and answer["summary"] is None


def test_an_organ_the_guideline_names_only_in_passing_weighs_against_and_is_named(sample: Path) -> None:
    """大腸 of 大腸がん検診 is a word of the lung sample, but on few pages and in no title: it
    names another disease, and the reasons say so."""
    answer = _ask(sample, COLON_SCREENING)
    assert answer["retrieval"]["coverage_model"]["features"]["passing_named"] == 1.0
    model = shipped().for_form(QA)
    assert model.coef[model.features.index("passing_named")] < 0
    if answer["coverage"] == "not_governed":
        assert any("『大腸』" in r and "わずかなページ" in r for r in answer["coverage_reasons"]), answer["coverage_reasons"]


def test_the_shipped_qa_cut_is_chosen_for_its_training_target_and_carries_the_curve() -> None:
    """The Q&A model's operating point is the lowest cut refusing TRAINING_TARGET of its
    training sites' out-of-scope questions, and the model file carries that refusal curve
    (calibrate's prior)."""
    from guiderag.eval.coverage_bench import TRAINING_TARGET

    model = shipped().for_form(QA)
    assert model.target_refusal == TRAINING_TARGET[QA]
    curve = model.meta["training_refusal"]
    cuts = [c for c, _ in curve]
    refused = [r for _, r in curve]
    assert cuts == sorted(cuts) and cuts[0] == 0.0 and cuts[-1] == 1.0
    assert refused == sorted(refused)  # a higher cut never refuses fewer
    at_point = max(r for c, r in curve if c <= model.operating_point)
    below = [r for c, r in curve if c < model.operating_point - 0.01]
    assert below and max(below) < TRAINING_TARGET[QA] <= max(r for c, r in curve if c <= model.operating_point + 0.005)
    assert 0.0 <= at_point <= 1.0



WIG = "脱毛はいつ始まりますか？かつらも考えています"  # かつら: a word the guidebook never uses


def test_near_the_operating_point_the_reasons_name_the_weakest_evidence(qa_settings: Settings) -> None:
    """An answer given close to the cut says what nearly refused it (marked NEAR_PREFIX);
    one given far above the cut, with reasons of its own, gives only those."""
    from guiderag import retrieval
    from guiderag.chatbot.coverage_decision import CoverageDecision
    from guiderag.chatbot.coverage_reasons import NEAR_PREFIX, near

    retriever = retrieval.load_retriever(qa_settings.retrieval, qa_settings.storage)
    decision = CoverageDecision.for_retriever(retriever)
    result = retriever.search(WIG, None)
    p = decision.judge(WIG, result, retriever, retriever.analyze).probability
    close = decision.judge(WIG, result, retriever, retriever.analyze, operating_point=p - 1e-3)
    assert close.covered and near(close.probability, close.operating_point)
    assert close.reasons and close.reasons[-1].startswith(NEAR_PREFIX) and "『かつら』" in close.reasons[-1], close.reasons
    assert not any(r.startswith(NEAR_PREFIX) for r in close.reasons[:-1])
    hair = retriever.search(HAIR, None)
    far = decision.judge(HAIR, hair, retriever, retriever.analyze, operating_point=0.05)
    assert far.covered and not near(far.probability, far.operating_point) and far.reasons
    assert not any(r.startswith(NEAR_PREFIX) for r in far.reasons), far.reasons
    # an answer no feature for answering can explain (only a positive weight with no sentence,
    # unknown_when) is given with its weakest evidence, close to the cut or not
    from guiderag.chatbot.coverage import measure_result
    from guiderag.chatbot.coverage_reasons import explain

    measured = measure_result(WIG, result, retriever, retriever.analyze)
    reasons = explain([("unknown_when", 0.9), ("page_coverage", -0.5)], measured, True)
    assert len(reasons) == 1 and reasons[0].startswith(NEAR_PREFIX) and "最も近いページ" in reasons[0], reasons


BICYCLE = "放射線治療の期間中に自転車に乗ってもいいですか？"  # 自転車: a word the guidebook never uses
COMMUTE = "放射線治療は通院で受けてもいいですか？"  # 通院: the guidebook's own word (Q6)


def test_a_permission_asked_for_what_the_guideline_never_names_weighs_against_and_is_said(qa_settings: Settings) -> None:
    """「自転車に乗ってもいいですか」 of a guidebook that never says 自転車: the thing asked about is
    unknown (permission_unknown), it pushes P down, and a refusal says so; 「通院で受けてもいい
    ですか」 asks about the guidebook's own word."""
    model = shipped().for_form(QA)
    assert model.coef[model.features.index("permission_unknown")] < 0
    with Library(BotConfig.of(qa_settings)) as library:
        bicycle = library.ask(BICYCLE).to_json()
        commute = library.ask(COMMUTE).to_json()
    assert bicycle["retrieval"]["coverage_model"]["features"]["permission_unknown"] == 1.0
    assert commute["retrieval"]["coverage_model"]["features"]["permission_unknown"] == 0.0
    assert bicycle["coverage"] == "not_governed", bicycle["coverage_reasons"]
    assert any("『自転車』" in r and "してよいか" in r for r in bicycle["coverage_reasons"]), bicycle["coverage_reasons"]
    assert commute["coverage"] == "governed", commute["coverage_reasons"]
