"""Goldens for the SentencePiece `Precompiled` normalizer (tests/unit/precompiled_test.cc).

  precompiled_nmt_nfkc   a Unigram model trained here by the `sentencepiece` library on ../shared/data
                         text with its default rule `nmt_nfkc`; the charsmap of the model's proto is put
                         into a tokenizer.json laid out as transformers' XLM-R converter writes one
                         (Sequence[Precompiled, Replace(" {2,}" -> " ")], Metaspace "▁", "<s> $A </s>")
  precompiled_nfkc_cf    the same with the rule `nfkc_cf` (NFKC and case folding)

Each is <name>/tokenizer.json and <name>/cases.json: a list of {"text", "ids", "offsets", "words",
"normalized"} from `tokenizers` (offsets as UTF-8 byte spans; "normalized": normalizer.normalize_str).
The strings are golden_sentencepiece's (~2,400) plus the hostile strings below, which aim at what the
charsmaps rewrite. transformers' converter needs protobuf, which is not installed, so the proto's two
fields used here are read by hand (read_model below); the tokenizer.json is built as the converter does.
"""
import importlib.util
import io
import json
import pathlib
import struct

import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

HERE = pathlib.Path(__file__).resolve().parent

_spec = importlib.util.spec_from_file_location("golden_sentencepiece", HERE / "golden_sentencepiece.py")
sp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sp)

HOSTILE = [
    # fullwidth letters, digits and punctuation; ideographic space
    "ＡＢＣ ａｂｃ １２３ ！？", "ＨｅｌｌｏＷｏｒｌｄ", "\u3000x\u3000\u3000y", "ｶﾀｶﾅ ﾊﾟﾋﾟ",
    # ligatures and compatibility characters
    "ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ", "ﬁnance oﬃce", "① ② ⑳ ⑴ ⒜", "㎏ ㎞ ㎡ ㍿ ㈱", "½ ¼ ¾ ² ³ ₁", "Ⅻ ⅻ Ⅳ", "™ ℠ ℃ ℉ № Ω K Å",
    "… ‥ ‼ ⁇", "ſtreet ﬅ", "µ μ", "ǆ ǅ Ǆ", "ℌ ℍ ℕ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐀𝐁𝐂",
    # combining marks, composed and not
    "e\u0301 a\u0300 o\u0308 n\u0303", "e\u0301\u0302\u0303", "\u0301x", "a\u0323\u0301", "x\u0301\u0301\u0301\u0301",
    "é é", "Å Å", "ḱ ǘ", "\u0041\u030a\u0301", "\u1100\u1161\u11a8 각 \u1100\u1161",
    # spaces, zero-width characters, controls
    "a\u00a0b", "a\u2002b\u2003c\u2009d\u200ae", "a\u202fb\u205fc", "a\u200bb\u200cc\u200dd\ufeffe",
    "\u200bstart", "end\u200b", "\u200b", "\ufeff\ufeff", "a\x00b", "\x01\x02\x1f", "tab\there", "x\x7fy",
    "\r\n", "a\r\nb", "a\rb", "\x0b\x0c", "\u0085next", "\u2028\u2029", "\u00ad soft\u00adhyphen", "\u2060joiner",
    "  many   spaces   here  ", "\u3000\u3000", "\u00a0\u00a0x",
    # emoji (with modifiers, ZWJ sequences, flags, keycaps, variation selectors)
    "😀 👍🏽 👨\u200d👩\u200d👧 🇫🇷🇩🇪 1\ufe0f\u20e3 ❤\ufe0f ☺︎", "🏳️‍🌈", "©\ufe0f ®",
    # scripts
    "中文字符和日本語の文章", "漢字 かな カナ ﾊﾝｶｸ", "한국어 안녕하세요", "مرحبا بكم في العالم", "ﻻ ﷺ ﷽", "עִבְרִית",
    "नमस्ते दुनिया क्ष", "ภาษาไทย", "Ελληνικά ΐ ϐ ϑ ϕ", "Съешь же ещё этих", "ａｂｃ中ｄｅｆ",
    # case folding targets (nfkc_cf)
    "Straße STRASSE ß ẞ", "İstanbul ı I", "ΣΊΣΥΦΟΣ ς σ", "ÀÉÎÕÜ", "ǅungla", "ﬀ ʼn", "Ꭰ ꭰ", "ĲSSEL",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "ＭｉＸｅＤ ＣａＳｅ",
    # pieces that look like special tokens
    "<s>", "</s>", "<unk>", "<s>text</s>", "▁", "▁▁x",
]


def strings():
    return sp.test_strings() + HOSTILE


def read_model(blob):
    """The pieces (piece, score, type) and the precompiled charsmap of a sentencepiece ModelProto.

    Protobuf wire format: ModelProto field 1 = pieces (message: 1 piece, 2 score float, 3 type),
    field 3 = normalizer_spec (message: 2 precompiled_charsmap bytes)."""
    def fields(buf):
        pos = 0
        while pos < len(buf):
            key, pos = varint(buf, pos)
            num, wire = key >> 3, key & 7
            if wire == 0:
                value, pos = varint(buf, pos)
            elif wire == 1:
                value, pos = buf[pos:pos + 8], pos + 8
            elif wire == 2:
                n, pos = varint(buf, pos)
                value, pos = buf[pos:pos + n], pos + n
            elif wire == 5:
                value, pos = buf[pos:pos + 4], pos + 4
            else:
                raise ValueError(f"wire type {wire}")
            yield num, value

    def varint(buf, pos):
        out = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            out |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return out, pos

    pieces, charsmap = [], b""
    for num, value in fields(blob):
        if num == 1:
            f = dict(fields(value))
            pieces.append((f[1].decode("utf-8"), struct.unpack("<f", f.get(2, b"\0\0\0\0"))[0], f.get(3, 1)))
        elif num == 3:
            charsmap = dict(fields(value)).get(2, b"")
    return pieces, charsmap


def train_model(corpus, rule, vocab_size=2000):
    """The serialized ModelProto of a Unigram model trained by `sentencepiece` (fixed seed, one thread)."""
    model = io.BytesIO()
    spm.set_random_generator_seed(20240517)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", normalization_rule_name=rule, num_threads=1,
                                   minloglevel=2)
    return model.getvalue()


def xlmr_tokenizer(blob):
    """The tokenizer.json transformers' XLMRobertaConverter makes of a sentencepiece model `blob`."""
    pieces, charsmap = read_model(blob)
    assert charsmap
    unk_id = next(i for i, (_, _, t) in enumerate(pieces) if t == 2)
    # As transformers' XLMRobertaConverter: <s> <pad> </s> <unk> first, then the pieces after the
    # model's own three specials (<unk>, <s>, </s>), then <mask>.
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p, s) for p, s, t in pieces[3:]]
    vocab += [("<mask>", 0.0)]
    assert unk_id == 0
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return tok


def trained_tokenizer(corpus, rule):
    return xlmr_tokenizer(train_model(corpus, rule))


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    texts = strings()
    corpus = sp.bpe.training_corpus()
    root = out_dir / "sentencepiece"
    names = []
    for rule in ("nmt_nfkc", "nfkc_cf"):
        name = f"precompiled_{rule}"
        tok = trained_tokenizer(corpus, rule)
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        tok.save(str(d / "tokenizer.json"))
        cases = sp.cases_from(tok, texts)
        for case in cases:
            case["normalized"] = tok.normalizer.normalize_str(case["text"])
        (d / "cases.json").write_text(json.dumps(cases, ensure_ascii=False))
        names.append(name)
    print(f"  precompiled: {', '.join(names)} x {len(texts)} strings")


if __name__ == "__main__":
    import sys
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
