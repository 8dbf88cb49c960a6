"""Decode an HTML page's bytes: header charset, then `<meta>`, then detection.

Never requests' ISO-8859-1 fallback (http.server and many Japanese sites send `text/html`
with no charset). Detection tries strict decodes: UTF-8 first (it almost never decodes
by accident), then Shift_JIS (as cp932, its Windows superset) and EUC-JP, keeping the one
whose text looks most like Japanese: EUC-JP bytes often decode "successfully" as cp932
half-width katakana, so the first strict success is not enough.
"""
from __future__ import annotations

import codecs
import re

# Labels servers use -> the Python codec that decodes what they mean.
ALIASES = {
    "shift_jis": "cp932", "shift-jis": "cp932", "sjis": "cp932", "x-sjis": "cp932",
    "ms_kanji": "cp932", "windows-31j": "cp932", "csshiftjis": "cp932", "ms932": "cp932",
    "euc-jp": "euc_jp", "x-euc-jp": "euc_jp", "eucjp": "euc_jp", "cseucpkdfmtjapanese": "euc_jp",
    "iso-2022-jp": "iso2022_jp", "csiso2022jp": "iso2022_jp",
    "utf8": "utf-8", "unicode-1-1-utf-8": "utf-8",
}
DETECT_ORDER = ("utf-8", "cp932", "euc_jp", "euc_jis_2004")
# Wider codecs tried when the named one fails strictly: servers say "EUC-JP" for eucJP-ms
# (with ① and other NEC specials, which Python's euc_jp lacks), "Shift_JIS" for JIS X 0213.
WIDER = {"euc_jp": ("euc_jis_2004",), "cp932": ("shift_jis_2004",)}
SNIFF_BYTES = 4096

HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9._:\-]+)", re.IGNORECASE)
META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9._:\-]+)", re.IGNORECASE)
XML_ENCODING = re.compile(rb"^<\?xml[^>]+encoding\s*=\s*[\"']([A-Za-z0-9._:\-]+)", re.IGNORECASE)

# Labels too often sent by default rather than meant (requests' own fallback among them):
# believed only when neither <meta> nor a strict UTF-8 decode says otherwise.
WEAK_LABELS = frozenset({"iso8859-1", "ascii", "cp1252"})

BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def codec_for(label: str | None) -> str | None:
    """The Python codec for a charset label, or None when Python does not know it."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    name = ALIASES.get(label, label)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def header_charset(content_type: str | None) -> str | None:
    """The charset named by a Content-Type header, if any."""
    match = HEADER_CHARSET.search(content_type or "")
    return match.group(1) if match else None


def meta_charset(body: bytes) -> str | None:
    """The charset named by `<meta charset>`, `<meta http-equiv>` or an XML declaration."""
    head = body[:SNIFF_BYTES]
    match = META_CHARSET.search(head) or XML_ENCODING.search(head)
    return match.group(1).decode("ascii", "replace") if match else None


def japanese_score(text: str) -> float:
    """How much `text` looks like real (Japanese or ASCII) text: higher is better."""
    good = bad = 0
    for ch in text:
        o = ord(ch)
        if o < 0x80 or 0x3040 <= o <= 0x30FF or 0x4E00 <= o <= 0x9FFF or 0x3000 <= o <= 0x303F or 0xFF01 <= o <= 0xFF5E:
            good += 1
        elif 0xFF61 <= o <= 0xFF9F or 0xE000 <= o <= 0xF8FF or o < 0x20 or 0x80 <= o <= 0x9F:
            bad += 1  # half-width katakana, private use, control: the marks of a wrong guess
    return good - 3 * bad


def detect(body: bytes) -> str | None:
    """The codec of `body` by strict decodes (UTF-8, then the likeliest Japanese one), or None."""
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    scored = []
    for codec in DETECT_ORDER[1:]:
        try:
            scored.append((japanese_score(body.decode(codec)), codec))
        except UnicodeDecodeError:
            continue
    if scored:
        # max() keeps the first of equal scores: cp932 before euc_jp, deterministic.
        return max(scored, key=lambda s: s[0])[1]
    return None


def decode_html(body: bytes, content_type: str | None = None) -> tuple[str, str]:
    """(text, codec used). Header, then meta, then detection; a lying label is skipped."""
    for bom, codec in BOMS:
        if body.startswith(bom):
            return body.decode(codec, errors="replace"), codec
    weak: str | None = None
    for label in (header_charset(content_type), meta_charset(body)):
        named = codec_for(label)
        if named in WEAK_LABELS:
            weak = weak or named
        elif named:
            for candidate in (named, *WIDER.get(named, ())):
                try:
                    return body.decode(candidate), candidate
                except UnicodeDecodeError:
                    continue  # the label is wrong for these bytes: look further
    detected = detect(body)
    if weak and detected != "utf-8":
        detected = weak
    codec = detected or "utf-8"  # nothing decodes cleanly: UTF-8 with replacement marks
    return body.decode(codec, errors="replace"), codec


# Characters no page's text holds: C0 controls but tab and line ends, DEL, C1 controls, and
# U+FFFD, which decoding puts where bytes made no sense. A share above MAX_JUNK_SHARE of the
# non-space characters means the bytes were not text (or not in any encoding we know).
JUNK = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ufffd]")
MAX_JUNK_SHARE = 0.02


def implausible_text(text: str) -> str | None:
    """Why decoded `text` cannot be a page (binary bytes, a wrong encoding), or None."""
    junk = len(JUNK.findall(text))
    if not junk:
        return None
    visible = len(text) - sum(text.count(c) for c in " \t\r\n\f")
    share = junk / max(1, visible)
    if share > MAX_JUNK_SHARE:
        return (f"{share:.0%} of its {visible} characters are control or replacement characters "
                f"(at most {MAX_JUNK_SHARE:.0%} can be text)")
    return None
