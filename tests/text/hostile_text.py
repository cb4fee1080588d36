"""Hand-picked hostile inputs for tokenizer tests (strings and raw bytes)."""

HOSTILE_LINES = [
    # accents and combining marks
    "Café naïve résumé Ångström Øresund Łódź",
    "ÉCOLE NORMALE SUPÉRIEURE à Paris",
    "e\u0301cole a\u0300\u0301\u0302b \u0301leading combining !\u0301 x\u0327\u0301",
    "Việt Nam Tiếng Việt ḍ ṇ ṣ",
    # CJK and other scripts
    "中文字符和English混合，还有标点。",
    "日本語のテキスト、カタカナとひらがな",
    "한국어 텍스트 안녕하세요",
    "\U00020000\U0002a6a5 extension B \uf900\ufa0e compatibility ideographs \u2f00 radical",
    "مرحبا بالعالم  שָׁלוֹם  नमस्ते  ภาษาไทย  Ελληνικά",
    # emoji and symbols
    "I \u2764\ufe0f emoji \U0001f600\U0001f44d\U0001f3fd family "
    "\U0001f468\u200d\U0001f469\u200d\U0001f467 flag \U0001f1eb\U0001f1f7",
    "½ ¼ … ™ ① ＡＢＣ！？ ﬁ ligature ß Straße ª º ² ³",
    "≠ ≮ ≯ \u1fef x\u1fefy \u1ffd ` ^ $ ~ | \\ @ # & * _ { } < > [ ]",
    # case corners
    "İstanbul ǅemal ǈ ǋ ΟΔΟΣ.ΑΒ ΟΔΟΣ Σ ὈΔΥΣΣΕΎΣ Ⅻ Ⓐ",
    "\u2c2f capital caudate chri \ua7c0 \U00010570 Unicode 14 capitals",
    # control, format and zero-width characters
    "zero\u200bwidth soft\u00adhyphen bom\ufeffhere ZWJ\u200d ZWNJ\u200c LRM\u200e RLO\u202e",
    "ctrl\x01\x02\x7f chars nul\x00inside rep\ufffdlacement \x1b[31mansi\x1b[0m",
    "\u0378 unassigned \ue000 private use \ufffe noncharacter \U000e0041 tag",
    # unusual whitespace
    "non\u00a0breaking line\u2028separator\u2029para tab\there cr\rlf\r\n",
    "ideographic\u3000space en\u2002em\u2003thin\u2009hair\u200a narrow\u202f mmsp\u205f",
    "\x1c\x1d\x1e\x1f seps next\x85line \x0b vtab \x0c formfeed",
    "   leading and trailing   ",
    # long words
    "a" * 100,
    "a" * 101,
    "é" * 60 + " accented sixty",
    "x" * 150 + " tail",
    "http://example.com/" + "abc/" * 40 + " url",
    "supercalifragilistic" * 6,
    "Ω" * 99 + "Ω",
    "한" * 40 + " hangul decomposes to 120 jamo",
    # empty-ish
    "",
    " ",
    "\u200b",
    "\x00",
    "\u0301",
    # special-looking text
    "[UNK] [CLS] [SEP] [MASK] [PAD] ## ##ing #hashtag",
    "3.14159 1,000,000 2nd 4th 10% $5.00 A&B",
]

# Raw byte strings; the original decodes them with errors="ignore".
HOSTILE_BYTES = [
    b"\xff\xfe abc",
    b"caf\xc3",
    b"caf\xc3 au lait",
    b"\xed\xa0\x80 surrogate",
    b"\xc0\xaf overlong",
    b"\xf4\x90\x80\x80 beyond U+10FFFF",
    b"ok\x00nul",
    b"mixed \xe4\xb8 half CJK \xe4\xb8\xad",
    b"\x80\x81\x82",
]
