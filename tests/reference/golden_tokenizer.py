"""Tokenizer goldens: what the Hugging Face `tokenizers` library produces for a few thousand varied
strings, read by tests/unit/tokenizer_test.cc.

Writes under out_dir/tokenizer/:
  manifest.json         the cases: which tokenizer (a tokenizer.json or a folder) and which expectations
  <case>.jsonl          one line per string: {"text", "ids", "words", "offsets"}; offsets are UTF-8 BYTE
                        spans [begin, end) into the text (the library reports character spans to Python;
                        they are converted here), words are word indices (-1 for template tokens)
  <case>.tokenizer.json variants of the model's tokenizer.json (cased, accents kept, added tokens, ...)
  vocab_<name>/         folders with only vocab.txt + tokenizer_config.json (the fallback path); their
                        expectations come from transformers' BertTokenizer built from the same files
  normalizer.json       BertNormalizer output over every code point, in chunks (only chunks it changes)

Everything is deterministic (fixed seed); it runs in a few seconds.
"""
import json
import pathlib
import random
import shutil
import unicodedata

SEED = 20240611

# ---------------------------------------------------------------------------------------------
# The strings


def _words():
    return (
        "the of and to in is was for that with as on by at from his her it an were are which this be "
        "or has had not first one their its new after but who they have two been other when there all "
        "during into school time may years more most only over city some world would where later up such "
        "used many can state about national out known university united then made attention head model "
        "transformer layer token language sentence embedding tokenizer research student analysis learning "
        "unbelievable internationalization antidisestablishmentarianism photosynthesis electroencephalogram "
        "running jumped happily quickly Paris London Zürich München Ångström naïve café résumé coöperate "
        "Straße Größe façade jalapeño piñata São Paulo Kraków Dvořák Łódź Ærø Þórsmörk Reykjavík"
    ).split()


SENTENCE_ENDS = [".", "!", "?", "...", "?!", ";", ":", ""]

ACCENTED = [
    "café", "naïve", "résumé", "über", "Ångström", "jalapeño", "façade", "São", "crème brûlée",
    "Dvořák", "Łódź", "Ærøskøbing", "Tiếng Việt", "Hà Nội", "phở", "Nguyễn", "Žižek", "Ørsted",
    "déjà vu", "coöperate", "piñata", "Müller", "Göteborg", "Malmö", "Türkçe", "İstanbul", "ğüşöçı",
    "Česká republika", "Kraków", "Español", "Português", "naïveté", "Ñandú", "ÀÉÎÕÜ", "àéîõü",
    "ǅemal", "ǈubljana", "Ǆ", "ǲ", "ḱṓṩ", "ẞ", "ß", "STRASSE", "Straße", "ﬁnance", "ﬂow", "ﬀ",
]

CJK = [
    "我爱自然语言处理", "今天天气很好。", "北京是中国的首都", "注意力机制", "变换器模型很强大",
    "他说：“你好！”", "漢字と仮名", "中文English混合", "三个臭皮匠，顶个诸葛亮", "龍", "𠀀𠀁𠀂",
    "𪚥", "丽", "豈更車", "㐀㐁", "𫝀", "𬺰", "𰀀",
]

JAPANESE_KOREAN = [
    "こんにちは世界", "カタカナ", "ひらがなとカタカナと漢字", "東京タワー", "ｶﾀｶﾅ", "ﾊﾝｶｸ",
    "私は学生です。", "日本語のテキスト", "ガギグゲゴ", "パピプペポ", "ー・「」『』",
    "안녕하세요", "한국어 문장입니다", "서울특별시", "ㄱㄴㄷ", "각", "한글", "대한민국",
]

EMOJI = [
    "😀", "👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵🇺🇸", "❤️", "☺️", "1️⃣", "#️⃣", "🧑🏿‍🚀",
    "👩‍❤️‍💋‍👨", "🫠", "🥰", "🤖", "🐍", "✨", "🔥🔥🔥", "🙂‍↔️", "🐦‍🔥", "😶‍🌫️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "©️", "™",
]

CONTROLS = [
    "\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f", "\x85", "\x9f",
    "\u00ad", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2028", "\u2029", "\u2060",
    "\u2061", "\ufeff", "\ufffd", "\ufff9", "\U000e0001", "\U000e0041", "\ue000", "\uf8ff",
    "\U000f0000", "\U0010fffd", "\u0600", "\u06dd", "\u180e", "\U0001d173",
]

WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u1680", "\u2000", "\u2003", "\u2009",
              "\u200a", "\u202f", "\u205f", "\u3000", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f"]

PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + [
    "¡", "¿", "«", "»", "‹", "›", "“", "”", "‘", "’", "„", "‚", "—", "–", "‐", "‑", "…", "·", "•",
    "§", "¶", "†", "‡", "‰", "′", "″", "‽", "⁂", "、", "。", "，", "：", "；", "！", "？", "（", "）",
    "【", "】", "《", "》", "〈", "〉", "「", "」", "『", "』", "〜", "・", "؟", "،", "।", "॥", "።",
    "¦", "¬", "±", "×", "÷", "°", "€", "£", "¥", "¢", "₹", "₽", "©", "®", "℃", "√", "∞", "≈", "≠",
    "≤", "≥", "←", "→", "↑", "↓", "♠", "♥", "★", "☆", "♪", "✓", "✗", "\u166d", "\U000111c9", "\u2e5d",
]

SCRIPTS = [
    "Привет, мир!", "Ёлка и йод", "ПРИВЕТ", "Україна", "Ђорђе", "Γειά σου Κόσμε", "ΟΔΥΣΣΕΥΣ",
    "ὈΔΥΣΣΕΎΣ", "σοφός", "ΣΊΣΥΦΟΣ", "Σ", "ς", "ΌΣΟΣ ΣΑΣ", "مرحبا بالعالم", "اَلْعَرَبِيَّةُ",
    "שָׁלוֹם עוֹלָם", "עִבְרִית", "नमस्ते दुनिया", "हिन्दी", "ক্ষ বাংলা", "ਪੰਜਾਬੀ", "ગુજરાતી",
    "தமிழ்", "తెలుగు", "ಕನ್ನಡ", "മലയാളം", "සිංහල", "สวัสดีชาวโลก", "ภาษาไทย", "ລາວ", "မြန်မာ",
    "ខ្មែរ", "ქართული", "Հայերեն", "ԵՒ", "ﬓ", "አማርኛ", "ᐃᓄᒃᑎᑐᑦ", "ᏣᎳᎩ", "ꮳꮃꭹ", "Ꭰ", "ᚠᚢᚦ",
    "𐌰𐌱𐌲", "𝐀𝐁𝐂 𝒜𝒷𝒸 𝔄𝔅", "Ⓐⓑⓒ", "ＡＢＣａｂｃ１２３", "Ⅻ ⅻ", "㎏ ㎞ ㍱", "ǰ", "İ", "ı", "i̇",
    "K", "Ω", "Å", "ẞ", "ᾈ", "ᾳ", "ᾼ", "ŉ", "ΐ", "ﬗ", "Ꞵ", "ꞵ", "Ａ", "𐐀𐐨", "𖹀", "𞤀𞤢", "Ᲊ",
]

COMBINING = ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030a", "\u030c", "\u0323", "\u0327",
             "\u0328", "\u0331", "\u0345", "\u0316", "\u031b", "\u0335", "\u0338", "\u0361", "\u05b4",
             "\u05bc", "\u064e", "\u0651", "\u093c", "\u094d", "\u0e31", "\u0e48", "\u1ab0", "\u1dc0",
             "\u20d7", "\u20e3", "\ufe0f", "\ufe0e", "\U0001f3fb", "\u3099", "\u309a", "\U0001e944"]

URLS = [
    "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
    "http://example.com/path?query=1&x=y#frag", "www.example.org", "user.name+tag@example.co.uk",
    "ftp://files.example.net/pub/file_v2.tar.gz", "C:\\Users\\Admin\\Documents\\file.txt",
    "/usr/local/bin/python3.11", "git@github.com:org/repo.git", "https://例子.测试/路径",
    "mailto:someone@example.com", "#hashtag @mention", "$HOME/.config", "foo_bar_baz",
    "camelCaseIdentifier", "snake_case_identifier", "SCREAMING_SNAKE_CASE", "x86_64-linux-gnu",
    "std::vector<int> v{1, 2, 3};", "if (a && b || !c) { return; }", "a->b->c", "i++; j--;",
    "<div class=\"x\">hi</div>", "{\"key\": [1, 2.5, null]}", "SELECT * FROM t WHERE x='y';",
]

SPECIAL_IN_TEXT = [
    "[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[mask]", "[Mask]", "[MASK]]", "[[MASK]", "[MASK][MASK]",
    "[MAS K]", "[CLS][SEP]", "x[SEP]y", "[MASK].", "the [MASK] sat", "  [MASK]  ", "[UNK]ing",
    "Paris is the [MASK] of France.", "[CLS] already here [SEP]", "\u00e9[MASK]\u0301",
]


def _number(rng):
    kind = rng.randrange(8)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if kind == 1:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randrange(0, 6)}f}"
    if kind == 2:
        return f"{rng.randrange(1, 10**9):,}"
    if kind == 3:
        return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    if kind == 4:
        return f"+1 ({rng.randrange(200, 999)}) {rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}"
    if kind == 5:
        return f"{rng.uniform(0, 1):.3e}"
    if kind == 6:
        return f"{rng.randrange(0, 100)}%"
    return rng.choice(["½", "¾", "²", "³", "①", "⑩", "٣", "۴", "४", "๕", "１２３", "Ⅳ", "0x1F", "1e-9", "3.14159"])


def _sentence(rng, words):
    n = rng.randrange(1, 25)
    ws = [rng.choice(words) for _ in range(n)]
    if rng.random() < 0.5:
        ws[0] = ws[0].capitalize()
    if rng.random() < 0.2:
        ws = [w.upper() for w in ws]
    text = ""
    for i, w in enumerate(ws):
        sep = " " if i else ""
        if i and rng.random() < 0.1:
            sep = rng.choice([", ", "; ", " - ", " (", ") ", "'s ", " \"", "\" "])
        text += sep + w
    return text + rng.choice(SENTENCE_ENDS)


def _interesting_char(rng):
    pool = rng.randrange(10)
    if pool == 0:
        return rng.choice(CONTROLS)
    if pool == 1:
        return rng.choice(WHITESPACE)
    if pool == 2:
        return rng.choice(PUNCT)
    if pool == 3:
        return rng.choice(COMBINING)
    if pool == 4:
        return rng.choice(rng.choice([ACCENTED, CJK, JAPANESE_KOREAN, EMOJI, SCRIPTS]))
    if pool == 5:
        return chr(rng.randrange(0x20, 0x7F))
    if pool == 6:
        return chr(rng.randrange(0xA0, 0x2000))
    if pool == 7:
        return chr(rng.randrange(0x2000, 0x3400))
    if pool == 8:
        cp = rng.randrange(0x10000, 0x30000)
        return chr(cp)
    cp = rng.randrange(0xA000, 0x10000)
    return chr(cp) if not 0xD800 <= cp < 0xE000 else "x"


def build_texts(vocab):
    rng = random.Random(SEED)
    words = _words()
    pieces = [t for t in vocab if t.isascii() and t.isalpha() and not t.startswith("[")]
    suffixes = [t for t in vocab if t.startswith("##")]
    nfd = lambda s: unicodedata.normalize("NFD", s)
    texts = []

    # Fixed edge cases.
    texts += ["", " ", "   ", "\t", "\n", "\r\n", " \t\n ", "\u3000", "\u00a0\u00a0", "\x00", "\ufffd",
              "\u200b", "a", "A", ".", "...", "a.b", "a b", "hello", "Hello, world!", "HELLO WORLD",
              "The animal didn't cross the street because it was too tired.", "x" * 100, "x" * 101,
              "a" * 250, "ab" * 51, "é" * 100, "é" * 101, nfd("é") * 100, "🙂" * 120, "国" * 150,
              "İ", "i̇", "Iİıi", "ß", "ẞ", "SS", "ΣΑΣ", "σας", "ΌΣΟΣ", "ǅ", "ﬃ", "Ⅻ", "ǰ̌", "ΐ"]
    texts += SPECIAL_IN_TEXT + URLS

    for _ in range(320):
        texts.append(_sentence(rng, words))
    for _ in range(120):
        w = rng.choice(ACCENTED)
        form = rng.choice(["NFC", "NFD", "NFKC", "NFKD", "mixed"])
        if form == "mixed":
            w = "".join(nfd(c) if rng.random() < 0.5 else c for c in w)
        else:
            w = unicodedata.normalize(form, w)
        texts.append(rng.choice(["", "The ", "un ", "le "]) + w + rng.choice(["", ".", " est bon", "!"]))
    for _ in range(80):
        texts.append("".join(rng.choice(CJK + [" ", "，", "。", "AI", "2024"]) for _ in range(rng.randrange(1, 6))))
    for _ in range(80):
        s = " ".join(rng.choice(JAPANESE_KOREAN) for _ in range(rng.randrange(1, 4)))
        texts.append(nfd(s) if rng.random() < 0.3 else s)
    for _ in range(100):
        parts = [rng.choice(EMOJI + words[:20] + [" ", "!", ""]) for _ in range(rng.randrange(1, 7))]
        texts.append(rng.choice(["", " "]).join(parts))
    for _ in range(100):
        s = list(_sentence(rng, words))
        for _ in range(rng.randrange(1, 5)):
            s.insert(rng.randrange(len(s) + 1), rng.choice(CONTROLS))
        texts.append("".join(s))
    for _ in range(80):
        ws = [rng.choice(words) for _ in range(rng.randrange(1, 8))]
        texts.append("".join(w + rng.choice(WHITESPACE) for w in ws))
    for _ in range(80):
        run = "".join(rng.choice(PUNCT) for _ in range(rng.randrange(1, 12)))
        texts.append(rng.choice(["", "word", "Wait"]) + run + rng.choice(["", "what", " end"]))
    for _ in range(60):
        n = rng.choice([99, 100, 101, 102, 150, 300])
        base = rng.choice(["a", "é", "ab", "xyz", "ü", "ка", "語", "🙂", "-", "0"])
        w = (base * n)[:n] if rng.random() < 0.5 else "".join(rng.choice(pieces) for _ in range(n // 3))
        texts.append(rng.choice(["", "start "]) + w + rng.choice(["", " end", "."]))
    for _ in range(80):
        texts.append(" ".join(_number(rng) for _ in range(rng.randrange(1, 5))))
    for _ in range(60):
        texts.append(rng.choice(URLS) + rng.choice(["", " and ", ", see "]) + rng.choice(URLS))
    for _ in range(150):
        texts.append(" ".join(rng.choice(SCRIPTS + words) for _ in range(rng.randrange(1, 6))))
    for _ in range(120):
        # Combining marks in every order (canonical reordering), stacked, after various bases.
        base = rng.choice(["a", "e", "o", "u", "A", "ø", "ά", "и", "ש", "ع", "क", "ก", "한", "ᄀ", " ", "", "1", "国"])
        marks = "".join(rng.choice(COMBINING) for _ in range(rng.randrange(1, 6)))
        texts.append(rng.choice(["", "x", "word "]) + base + marks + rng.choice(["", "b", " end", marks]))
    for _ in range(60):
        texts.append(" ".join(rng.choice(SPECIAL_IN_TEXT + words[:30]) for _ in range(rng.randrange(1, 6))))
    for _ in range(200):
        # Words assembled from vocabulary entries: exercises the greedy longest-match.
        w = rng.choice(pieces) + "".join(rng.choice(suffixes)[2:] for _ in range(rng.randrange(0, 4)))
        texts.append(" ".join([w] + [rng.choice(pieces) for _ in range(rng.randrange(0, 4))]))
    for _ in range(450):
        texts.append("".join(_interesting_char(rng) for _ in range(rng.randrange(1, 40))))

    # Every code point below U+30000 (CJK ideographs and private use sampled) between two letters,
    # 64 per string: shows which ones are dropped, split off as punctuation or taken as whitespace.
    sweep = []
    for cp in range(0x30000):
        if 0xD800 <= cp < 0xE000:
            continue
        if unicodedata.category(chr(cp)) in ("Lo", "Co", "Cn") and cp % 23:
            continue
        sweep.append(cp)
    sweep += list(range(0xE0000, 0xE0080)) + list(range(0xE0100, 0xE01F0, 7)) + [0xF0000, 0x10FFFD]
    for i in range(0, len(sweep), 64):
        texts.append(" ".join(f"a{chr(cp)}b" for cp in sweep[i:i + 64]))
    return texts


# ---------------------------------------------------------------------------------------------
# Encoding with the oracle


def _record(text, enc):
    # Character offsets (the library's Python view) -> UTF-8 byte offsets.
    byte_at = [0]
    for ch in text:
        byte_at.append(byte_at[-1] + len(ch.encode("utf-8")))
    return {
        "text": text,
        "ids": enc.ids,
        "words": [-1 if w is None else w for w in enc.word_ids],
        "offsets": [[byte_at[b], byte_at[e]] for b, e in enc.offsets],
    }


def _write_case(tok, texts, path):
    tok.no_truncation()
    tok.no_padding()
    encs = tok.encode_batch(texts, add_special_tokens=True)
    with open(path, "w", encoding="utf-8") as f:
        for text, enc in zip(texts, encs):
            f.write(json.dumps(_record(text, enc), ensure_ascii=True) + "\n")


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    from tokenizers import AddedToken, Tokenizer, normalizers

    out = out_dir / "tokenizer"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    model_json = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    texts = build_texts(model_json["model"]["vocab"])
    subset = texts[:1200] + texts[1200::3]  # for the variants: all the varied strings, part of the sweep
    manifest = []

    # The model's own tokenizer.json, on every string.
    _write_case(Tokenizer.from_file(str(model_dir / "tokenizer.json")), texts, out / "minilm.jsonl")
    manifest.append({"name": "minilm", "tokenizer": "MODEL", "expected": "minilm.jsonl"})

    # BertNormalizer variants of the same vocabulary.
    variants = {
        "cased": {"lowercase": False, "strip_accents": None},
        "cased_strip_accents": {"lowercase": False, "strip_accents": True},
        "lowercase_keep_accents": {"lowercase": True, "strip_accents": False},
        "no_clean_no_chinese": {"clean_text": False, "handle_chinese_chars": False},
    }
    normalizer_configs = {"minilm": model_json["normalizer"]}
    for name, change in variants.items():
        j = json.loads(json.dumps(model_json))
        j["normalizer"].update(change)
        normalizer_configs[name] = j["normalizer"]
        path = out / f"{name}.tokenizer.json"
        path.write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
        _write_case(Tokenizer.from_file(str(path)), subset, out / f"{name}.jsonl")
        manifest.append({"name": name, "tokenizer": path.name, "expected": f"{name}.jsonl"})

    # Added-token options (lstrip/rstrip/single_word/normalized) and the older BertProcessing.
    j = json.loads(json.dumps(model_json))
    j["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
    for t in j["added_tokens"]:
        if t["content"] == "[MASK]":
            t["lstrip"] = True
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_tokens([AddedToken("New York", normalized=True), AddedToken("cat", single_word=True, normalized=False),
                    AddedToken("état", normalized=True)])
    tok.add_special_tokens([AddedToken("<ent>", rstrip=True, lstrip=True, normalized=False)])
    path = out / "added_tokens.tokenizer.json"
    path.write_text(tok.to_str(), encoding="utf-8")
    added_texts = subset[:400] + [
        "I love New York", "NEW YORK new york New  York", "a cat, the cats, concatenate, cat", "catcat cat.",
        "l'état ÉTAT etat", "<ent>x<ent>  y  <ent>", "  <ent>  ", "the [MASK] and   [MASK]", "[MASK]",
        "cat", "Cat", "scat cat_ cat1 cat-", "é<ent>", "New Yorker", "New\u00a0York",
    ]
    _write_case(Tokenizer.from_file(str(path)), added_texts, out / "added_tokens.jsonl")
    manifest.append({"name": "added_tokens", "tokenizer": path.name, "expected": "added_tokens.jsonl"})

    # Folders without tokenizer.json: the reference is transformers' BertTokenizer from those files.
    from transformers import BertTokenizer

    base_config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    for name, lower in (("vocab_uncased", True), ("vocab_cased", False)):
        d = out / name
        d.mkdir()
        shutil.copy(model_dir / "vocab.txt", d / "vocab.txt")
        config = dict(base_config, do_lower_case=lower)
        (d / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        reference = BertTokenizer.from_pretrained(str(d)).backend_tokenizer
        _write_case(reference, subset, out / f"{name}.jsonl")
        manifest.append({"name": name, "tokenizer": name, "expected": f"{name}.jsonl"})

    # BertNormalizer on every code point (surrogates excluded), 256 consecutive code points per
    # chunk; only the chunks the normalizer changes are listed, the others must come back unchanged.
    chunks = []
    for start in range(0, 0x110000, 256):
        if 0xD800 <= start < 0xE000:
            continue
        chunks.append((start, "".join(chr(cp) for cp in range(start, start + 256))))
    normalized = {}
    for name, config in normalizer_configs.items():
        n = normalizers.BertNormalizer(
            clean_text=config["clean_text"], handle_chinese_chars=config["handle_chinese_chars"],
            strip_accents=config["strip_accents"], lowercase=config["lowercase"])
        changed = {}
        for start, chunk in chunks:
            result = n.normalize_str(chunk)
            if result != chunk:
                changed[str(start)] = result
        normalized[name] = {"config": config, "changed": changed}
    (out / "normalizer.json").write_text(json.dumps({"chunk": 256, "configs": normalized}, ensure_ascii=False),
                                         encoding="utf-8")

    (out / "manifest.json").write_text(json.dumps({"cases": manifest}, indent=1), encoding="utf-8")
    print(f"  tokenizer: {len(texts)} strings, {len(manifest)} cases")
