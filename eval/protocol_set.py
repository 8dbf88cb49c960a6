"""The published protocol's question set, in Japanese: writes eval/questions/protocol.xlsx.

Four questions about an in-scope tumour type (thymic tumours) and the same four about an
out-of-scope one (paediatric glioma): diagnostic methods, pathological diagnosis,
treatment options, surgical options. Regenerate with `python -m guiderag.eval.protocol_set`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from guiderag.resources import question_set

from .workbook import IN_SCOPE, OUT_OF_SCOPE, Question, write_questions

PROTOCOL_PATH = question_set("protocol.xlsx")
IN_SCOPE_SUBJECT = "胸腺腫瘍"
OUT_OF_SCOPE_SUBJECT = "小児の神経膠腫"
TEMPLATES = (
    "{x}にはどのような診断方法がありますか？",
    "{x}の病理診断にはどのような方法がありますか？",
    "{x}にはどのような治療法がありますか？",
    "{x}の手術にはどのような方法がありますか？",
)


def protocol_questions() -> list[Question]:
    """The eight questions: P-IN-1..4 (in scope), then P-OUT-1..4 (out of scope)."""
    out = [Question(f"P-IN-{i}", t.format(x=IN_SCOPE_SUBJECT), IN_SCOPE) for i, t in enumerate(TEMPLATES, 1)]
    out += [Question(f"P-OUT-{i}", t.format(x=OUT_OF_SCOPE_SUBJECT), OUT_OF_SCOPE) for i, t in enumerate(TEMPLATES, 1)]
    return out


def write_protocol(path: Path = PROTOCOL_PATH) -> Path:
    """Write the protocol question workbook; return its path."""
    write_questions(protocol_questions(), path)
    return path


if __name__ == "__main__":
    print(write_protocol(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTOCOL_PATH))
