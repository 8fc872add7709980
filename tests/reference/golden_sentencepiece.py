"""Goldens for the SentencePiece vocabularies (tests/unit/sentencepiece_test.cc).

  gemma3         the real Gemma 3 270M vocabulary (262,144 pieces, `tokenizer.ggml.model = llama`)
                 as transformers builds it from models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf: the
                 oracle for headscope's GGUF SentencePiece reader (only when the file is there)
  unigram        a Unigram model trained here by the `tokenizers` library on ../shared/data text
                 (Metaspace "▁", prepend always, split on spaces; unknown pieces fused), with a T5-style
                 "$A </s>" template
  unigram_bytes  the same pieces plus <0x00>..<0xFF> and byte_fallback, no template

Each is <name>/cases.json: a list of {"text", "ids", "offsets", "words"}, offsets as UTF-8 byte
spans (the Python API's character offsets converted); the Unigram ones also <name>/tokenizer.json.
The strings are golden_bpe's (~2,300: PUD and GAP sentences, generated edge cases) plus the hostile
strings below.
"""
import importlib.util
import json
import pathlib

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GEMMA = ROOT / "models" / "gemma-3-270m"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"

_spec = importlib.util.spec_from_file_location("golden_bpe", HERE / "golden_bpe.py")
bpe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bpe)

HOSTILE = [
    "", " ", "  ", "   ", " x", "x ", "  x  ", "x  y", "x   y", "\t", "\t\tx", "x\ty", "\n", "\n\n", "x\n\n\ny",
    " \n \t ", "\r\n", "a\u00a0b", "\u3000", "12345678901234567890", "3.14 and 2,718", "0x7fff_ffff",
    "😀", "😀😀 👍🏽", "👨\u200d👩\u200d👧", "中文字符和日本語の文章", "مرحبا بكم في العالم", "e\u0301\u0302\u0303",
    "\u0301 starts with a mark", "ﬁ ligature", "Ⅻ", "\U000f0000 private", "\ue000\ue001", "\x00\x01\x7f", "\U0010ffff",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\u200b\u200c\u200d", "def f(x):\n    return {'a': [1, 2]}\n",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<bos>", "<eos>text<eos>", "<pad><pad>",
    "<unk>", "<mask>", "[multimodal]", "<start_of_image>", "<unused0><unused99>", "< start_of_turn >",
    "<0x41>", "<0xZZ>", "▁", "▁▁x", "x▁y", "<s>", "</s>", "<|endoftext|>",
    "  leading and trailing  ", "\t\ttabs\tand\nnewlines\n\n", "a" * 300, " " * 40, "\n" * 40, "ab" * 200,
]


def test_strings():
    return bpe.test_strings() + HOSTILE


def byte_offsets(text, char_offsets):
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[b], pos[e]] for b, e in char_offsets]


def cases_from(tok, strings):
    out = []
    for enc, text in zip(tok.encode_batch(strings), strings):
        out.append({"text": text, "ids": enc.ids, "offsets": byte_offsets(text, enc.offsets),
                    "words": [-1 if w is None else w for w in enc.word_ids]})
    return out


def unigram_tokenizers(corpus):
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.train_from_iterator(corpus, trainers.UnigramTrainer(
        vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>", shrinking_factor=0.75,
        max_piece_length=16, n_sub_iterations=2, show_progress=False))
    plain = Tokenizer.from_str(tok.to_str())
    plain.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])

    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    lowest = min(score for _, score in vocab)
    present = {piece for piece, _ in vocab}
    vocab += [[f"<0x{b:02X}>", lowest] for b in range(256) if f"<0x{b:02X}>" not in present]
    spec["model"]["byte_fallback"] = True
    return {"unigram": plain, "unigram_bytes": Tokenizer.from_str(json.dumps(spec))}


def gemma_tokenizer():
    if not (GEMMA / GEMMA_FILE).exists():
        return None
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(GEMMA), gguf_file=GEMMA_FILE).backend_tokenizer


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    strings = test_strings()
    root = out_dir / "sentencepiece"
    toks = unigram_tokenizers(bpe.training_corpus())
    gemma = gemma_tokenizer()
    if gemma is not None:
        toks["gemma3"] = gemma
    for name, tok in toks.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        if name != "gemma3":
            tok.save(str(d / "tokenizer.json"))
        (d / "cases.json").write_text(json.dumps(cases_from(tok, strings), ensure_ascii=False))
    print(f"  sentencepiece: {', '.join(toks)} x {len(strings)} strings")


if __name__ == "__main__":
    import sys
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
