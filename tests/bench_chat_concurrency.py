"""Benchmark: N patients asking at once in the chat, each in their own Chromium, with the
real local model (tests/local_model.py) serving keywords and answers. Prints the time from
Enter to the answer on screen for each, p50 and p95 (by mode and overall), the model
outcomes from the audit log, and the machine's load. Not a test (pytest does not collect it).

    .venv/bin/python tests/bench_chat_concurrency.py --sessions 10 --modes lines
    .venv/bin/python tests/bench_chat_concurrency.py --sessions 10 --modes lines,extract,extract
    # the app of another checkout (e.g. before a change), installed with
    # pip install --no-deps --target DIR <checkout>, run from there:
    .venv/bin/python tests/bench_chat_concurrency.py --app-from DIR --label before

`--modes` is cycled over the sessions (lines,extract,extract: a third ask in lines mode).
Each session asks its own question (the protocol's in-scope four and patient-worded ones
about the sample guideline), all pressing Enter within a fraction of a second.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import local_model  # noqa: E402
import browserkit as tb  # noqa: E402  (the browser helpers: Chromium, the Streamlit app, send)

QUESTIONS = (
    "胸腺腫瘍にはどのような診断方法がありますか？",
    "胸腺腫瘍の病理診断にはどのような方法がありますか？",
    "胸腺腫瘍にはどのような治療法がありますか？",
    "胸腺腫瘍の手術にはどのような方法がありますか？",
    "胸腺腫の治療法は？",
    "放射線治療の副作用は？",
    "抗がん剤治療はどのように行いますか",
    "再発したときの治療は？",
    "手術の後の生活で気をつけることは",
    "胸腺がんとは何ですか",
    "重症筋無力症と胸腺腫の関係は？",
    "手術の合併症にはどのようなものがありますか",
)
MODE_LABELS = {"extract": "原文の抜粋（AIを使いません）", "lines": "AIが該当する行を選ぶ", "generate": "AIによる要約＋原文"}


class _Factory:
    """tmp_path_factory's one method the app launcher uses."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=name + "-", dir=self.root))


def _driver():
    return tb.chromium(tempfile.mkdtemp(prefix="guiderag-bench-chromium-"))


def _choose_mode(driver, mode: str) -> None:
    from selenium.webdriver.common.by import By

    sidebar = driver.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]')
    [choice] = [e for e in sidebar.find_elements(By.CSS_SELECTOR, "label") if e.text == MODE_LABELS[mode]]
    choice.click()
    time.sleep(0.5)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--modes", default="lines", help="answer modes cycled over the sessions")
    parser.add_argument("--app-from", type=Path, help="run the app of the guiderag installed in this folder")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--env", action="append", default=[], help="extra KEY=VALUE for the app")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a session may wait")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    root = Path(tempfile.mkdtemp(prefix="guiderag-bench-chat-"))
    factory = _Factory(root)
    load_before = os.getloadavg()

    from guiderag.chatbot.audit import AuditLog
    from guiderag.settings import Settings
    from guiderag.store import Store
    from guiderag.ui.bootstrap import ensure_corpus

    db = root / "guiderag.db"
    ensure_corpus(Settings.load(env={}, db=db))
    with local_model.serve(root) as model:
        env = {"GUIDERAG_DB": str(db), "GUIDERAG_MODE": "lines", **model.env()}
        app_dir = None
        if args.app_from:
            app_dir = args.app_from.resolve()
            (app_dir / "app.py").write_text("from guiderag.ui.page import main\n\nmain()\n", encoding="utf-8")
            env["PYTHONPATH"] = str(app_dir)
        env.update(dict(kv.split("=", 1) for kv in args.env))
        app = tb.streamlit_app(factory, env, app_dir)  # type: ignore[arg-type]
        url = next(app)
        try:
            drivers = [_driver() for _ in range(args.sessions)]
            plan = [(modes[i % len(modes)], QUESTIONS[i % len(QUESTIONS)]) for i in range(args.sessions)]
            for driver, (mode, _) in zip(drivers, plan):
                tb.open_chat(driver, url, 1280, 1000)
                if mode != "lines":
                    _choose_mode(driver, mode)
            # Warm up: the first question of the process loads the index (not what we time).
            warm = _driver()
            tb.open_chat(warm, url, 1280, 1000)
            _choose_mode(warm, "extract")
            tb.send(warm, "胸腺腫瘍とは何ですか", timeout=args.timeout)
            warm.quit()
            with Store(db) as store:
                audit_before = AuditLog(store.conn).count()
            barrier = threading.Barrier(args.sessions)
            times: list[float | None] = [None] * args.sessions
            errors: list[str] = []

            def session(i: int) -> None:
                mode, question = plan[i]
                try:
                    barrier.wait()
                    times[i] = tb.send(drivers[i], question, timeout=args.timeout) / 1000.0
                except Exception as exc:  # report, do not hide: a session that never got its answer
                    errors.append(f"session {i} ({mode}, {question}): {type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=session, args=(i,)) for i in range(args.sessions)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - t0
        finally:
            for d in locals().get("drivers", []):
                d.quit()
            app.close()
    with Store(db) as store:
        rows = AuditLog(store.conn).rows()[audit_before:]
    outcomes: dict[str, int] = {}
    for r in rows:
        use = json.loads(r["model_use"] or "{}").get("answer", {}) if "model_use" in r else {}
        key = f"{r['requested_mode']}/{use.get('outcome', 'no model')}" + (f" ({use['code']})" if use.get("code") else "")
        outcomes[key] = outcomes.get(key, 0) + 1
    load_after = os.getloadavg()

    lines = [f"chat concurrency ({args.label}): {args.sessions} Chromium sessions asking at once, modes "
             f"{','.join(modes)}; Gemma 3 270M via llama.cpp (one request at a time); wall {wall:.1f} s"]
    groups = {"all": [t for t in times if t is not None]}
    for (mode, _), t in zip(plan, times):
        if t is not None:
            groups.setdefault(mode, []).append(t)
    summary = {}
    for name, values in groups.items():
        if values:
            summary[name] = {"n": len(values), "p50_s": round(statistics.median(values), 1),
                             "p95_s": round(_pct(values, 95), 1), "max_s": round(max(values), 1)}
            lines.append(f"  {name:8} n={len(values):2}  p50 {summary[name]['p50_s']:6.1f} s  "
                         f"p95 {summary[name]['p95_s']:6.1f} s  max {summary[name]['max_s']:6.1f} s")
    lines.append("  each (s): " + ", ".join(f"{m}:{t:.1f}" if t is not None else f"{m}:-" for (m, _), t in zip(plan, times)))
    lines.append(f"  model outcomes (audit): {outcomes}")
    lines.append(f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (2 cores, shared)")
    for e in errors:
        lines.append("  ERROR " + e)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"label": args.label, "modes": modes, "wall_s": wall, "summary": summary,
                                         "times": times, "outcomes": outcomes, "errors": errors}, ensure_ascii=False))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
