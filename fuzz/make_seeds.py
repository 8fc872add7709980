"""Seed corpora for the fuzz targets of fuzz/, made from the project's real files.

    .venv/bin/python fuzz/make_seeds.py --out build-sanitize/seeds

Writes one folder per target. Every seed is a small valid input cut from a real file, so that the
fuzzer starts inside the formats instead of having to discover them:
  safetensors     the default model's own header and bytes, a few real tensors per seed, in F32,
                  F16 and BF16
  gguf            the SmolLM2 GGUF's real metadata (vocabulary cut to its first tokens and merges)
                  with real rows of its F32, Q8_0 and Q4_1 tensors, and a tiny BERT GGUF under
                  llama.cpp's converter names with the default model's first WordPiece pieces
  config          the default model's config.json and the configs transformers writes for the
                  other supported families (Llama, Mistral, Qwen2, GPT-2, Phi-3, OLMo 2, Gemma 1-3,
                  RoBERTa, XLM-R, DistilBERT)
  tokenizer_json  the default model's tokenizer.json with its vocabulary cut down, and a byte-level
                  BPE tokenizer.json written by the tokenizers library
  precompiled     small precompiled_charsmaps (length-prefixed) with texts to normalise
  analyse         attention map shapes and weights in analyse_fuzzer's byte layout
  chat_template   the SmolLM2 chat template and small variations
  encode          sentences of the gold treebanks and GAP
  conllu, gap     the first sentences / rows of the gold data files
  http            requests as the explorer sends them (docs/api.md), raw HTTP/1.1
Deterministic: the same files give the same seeds.
"""
import argparse
import base64
import json
import pathlib
import struct

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--out", type=pathlib.Path, required=True)
ap.add_argument("--model", type=pathlib.Path, default=ROOT / "models/all-MiniLM-L6-v2")
ap.add_argument("--decoder", type=pathlib.Path, default=ROOT / "models/SmolLM2-135M-Instruct")
ap.add_argument("--data", type=pathlib.Path, default=ROOT.parent / "shared/data")
args = ap.parse_args()


def folder(name: str) -> pathlib.Path:
    d = args.out / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def write(name: str, seed: str, data) -> None:
    (folder(name) / seed).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


# ---- safetensors: real tensors of the default model, re-serialised by the reference library ----
def safetensors_seeds() -> None:
    import torch
    from safetensors import safe_open
    from safetensors.torch import save

    with safe_open(str(args.model / "model.safetensors"), "pt") as f:
        names = sorted(f.keys())
        small = [n for n in names if "LayerNorm" in n or n.endswith("attention.self.query.bias")][:6]
        tensors = {n: f.get_tensor(n) for n in small}
        emb = f.get_tensor("embeddings.position_embeddings.weight")[:4].clone()
    write("safetensors", "f32", save(tensors, metadata={"format": "pt"}))
    write("safetensors", "f16", save({n: t.half() for n, t in list(tensors.items())[:3]}))
    write("safetensors", "bf16", save({n: t.bfloat16() for n, t in list(tensors.items())[:3]}))
    write("safetensors", "matrix", save({"embeddings.position_embeddings.weight": emb}))
    write("safetensors", "empty", save({}))


# ---- GGUF: the real decoder's metadata and rows of its tensors ----
def gguf_seeds() -> None:
    import gguf

    path = next(args.decoder.glob("*.gguf"))
    reader = gguf.GGUFReader(str(path))

    def field_value(field):
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            return [field.contents(i) for i in range(min(len(field.data), 300))], field.types[1]
        return field.contents(), field.types[0]

    def build(seed: str, tensor_names, n_rows: int) -> None:
        out = args.out / "gguf" / seed
        out.parent.mkdir(parents=True, exist_ok=True)
        w = gguf.GGUFWriter(str(out), arch=reader.fields["general.architecture"].contents())
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key == "general.architecture":
                continue
            value, vtype = field_value(field)
            if field.types[0] == gguf.GGUFValueType.ARRAY:
                w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=vtype)
            else:
                w.add_key_value(key, value, vtype)
        for t in reader.tensors:
            if t.name not in tensor_names:
                continue
            data = np.asarray(t.data)
            rows = data[:n_rows] if data.ndim > 1 else data  # quantized: [rows, bytes per row]
            w.add_tensor(t.name, np.ascontiguousarray(rows), raw_dtype=t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    build("norms_f32", {"blk.0.attn_norm.weight", "output_norm.weight"}, 1)
    build("q4_1_rows", {"blk.0.attn_k.weight", "blk.0.attn_norm.weight"}, 2)
    build("q8_0_rows", {"token_embd.weight"}, 2)
    bert_gguf_seed()


def bert_gguf_seed() -> None:
    """A BERT GGUF as llama.cpp's convert_hf_to_gguf.py names it (BertModel): d_model 8, 2 heads,
    1 layer, 300 of the default model's WordPiece pieces spelled as the converter spells them."""
    import gguf

    vocab = (args.model / "vocab.txt").read_text().splitlines()
    vocab = vocab[:110] + vocab[1990:2100] + vocab[29000:29080]  # the specials, words, "##" pieces
    control = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    pieces, types = [], []
    for t in vocab:
        if t in control:
            pieces.append(t)
            types.append(gguf.TokenType.CONTROL)
        else:
            pieces.append(t[2:] if t.startswith("##") else "\u2581" + t)
            types.append(gguf.TokenType.NORMAL)
    out = args.out / "gguf" / "bert_tiny"
    w = gguf.GGUFWriter(str(out), arch="bert")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_tokenizer_model("bert")
    w.add_token_list(pieces)
    w.add_token_types(types)
    w.add_unk_token_id(vocab.index("[UNK]"))
    w.add_bos_token_id(vocab.index("[CLS]"))
    w.add_sep_token_id(vocab.index("[SEP]"))
    w.add_pad_token_id(vocab.index("[PAD]"))
    w.add_mask_token_id(vocab.index("[MASK]"))
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (len(pieces), 8), "position_embd.weight": (128, 8), "token_types.weight": (2, 8),
              "token_embd_norm.weight": (8,), "token_embd_norm.bias": (8,)}
    for m in ("attn_q", "attn_k", "attn_v", "attn_output"):
        shapes[f"blk.0.{m}.weight"], shapes[f"blk.0.{m}.bias"] = (8, 8), (8,)
    shapes.update({"blk.0.ffn_up.weight": (16, 8), "blk.0.ffn_up.bias": (16,), "blk.0.ffn_down.weight": (8, 16),
                   "blk.0.ffn_down.bias": (8,)})
    for n in ("attn_output_norm", "layer_output_norm"):
        shapes[f"blk.0.{n}.weight"], shapes[f"blk.0.{n}.bias"] = (8,), (8,)
    for name, shape in shapes.items():
        w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- config.json: the default model's and those transformers writes for the other families ----
def config_seeds() -> None:
    from transformers import (DistilBertConfig, Gemma2Config, Gemma3TextConfig, GemmaConfig, GPT2Config, LlamaConfig,
                              MistralConfig, Olmo2Config, Phi3Config, Qwen2Config, RobertaConfig, XLMRobertaConfig)

    write("config", "bert", (args.model / "config.json").read_bytes())
    small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=100, max_position_embeddings=64)
    for name, cls in (("llama", LlamaConfig), ("mistral", MistralConfig), ("qwen2", Qwen2Config)):
        write("config", name, cls(**small).to_json_string())
    write("config", "gpt2", GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64).to_json_string())
    for name, cls in (("phi3", Phi3Config), ("olmo2", Olmo2Config), ("gemma", GemmaConfig), ("gemma2", Gemma2Config),
                      ("gemma3_text", Gemma3TextConfig)):
        extra = dict(head_dim=16) if name.startswith("gemma") else {}
        write("config", name, cls(**small, **extra).to_json_string())
    encoder = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=100,
                   max_position_embeddings=66)
    write("config", "roberta", RobertaConfig(**encoder).to_json_string())
    write("config", "xlm_roberta", XLMRobertaConfig(**encoder).to_json_string())
    write("config", "distilbert", DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=100,
                                                   max_position_embeddings=64).to_json_string())


# ---- tokenizer.json: the real one with a small vocabulary, and a byte-level BPE ----
def tokenizer_seeds() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders

    real = json.loads((args.model / "tokenizer.json").read_text())
    vocab = real["model"]["vocab"]
    keep = {k: v for k, v in vocab.items() if v < 1200}
    real["model"]["vocab"] = keep
    write("tokenizer_json", "wordpiece", json.dumps(real))

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    bpe.train_from_iterator(sentences(200), trainer=trainer)
    write("tokenizer_json", "bytelevel_bpe", bpe.to_str())

    # A Unigram model with a Precompiled normalizer whose small charsmap is built here (the real
    # nmt_nfkc one is ~180 KB, over the fuzzer's max_len), laid out as an XLM-R tokenizer.json.
    rules = {"\uff21": "A", "\ufb01": "fi", "U\u0308": "\u00dc", "\u00dc": "U", "\u200b": "", "\u3000": " ",
             "\u2460": "1", "\u6771\u4eac": "Tokyo"}
    pieces = [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u2581", -2.0]]
    pieces += [[w, -3.0 - i / 100] for i, w in enumerate(sorted({w for t in sentences(50) for w in t.split()})[:300])]
    spm = {"normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap(rules)).decode()},
               {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
           "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
           "model": {"type": "Unigram", "unk_id": 3, "vocab": pieces, "byte_fallback": False}}
    write("tokenizer_json", "unigram_precompiled", json.dumps(spm))


# ---- precompiled_charsmap as raw bytes: u16 length, the blob, a text (precompiled_fuzzer.cc) ----
def precompiled_seeds() -> None:
    rules = {"\uff21": "A", "\ufb01": "fi", "U\u0308": "\u00dc", "\u00dc": "U", "\u200b": "", "\u3000": " ",
             "\u2460": "1", "\u6771\u4eac": "Tokyo", "a": "aa", "\u00e9": "e\u0301"}
    texts = ["\uff21\ufb01 caf\u00e9 U\u0308ber\u200b \u6771\u4eac\u3000\u2460", "plain ascii text", "e\u0301\u0301 \U0001F469\u200d\U0001F52C"]
    for name, r in (("rules", rules), ("one", {"\u00c5": "A"}), ("deep", {"abcdefgh": "x", "abc": "", "ab": "yz"})):
        blob = charsmap(r)
        for i, text in enumerate(texts):
            write("precompiled", f"{name}_{i}", struct.pack("<H", len(blob)) + blob + text.encode())
    write("precompiled", "base64", base64.b64encode(charsmap(rules)))


# ---- attention maps in analyse_fuzzer.cc's layout: flags, T, overview cells, tokens, weights ----
def analyse_seeds() -> None:
    def seed(name: str, layers: int, heads: int, causal: int, plain: bool, normalised: bool, tokens, weights: bytes):
        flags = layers | heads << 2 | causal << 4 | (0x40 if plain else 0) | (0x80 if normalised else 0)
        write("analyse", name, bytes([flags, len(tokens), 16]) + bytes(tokens) + weights)

    rng = np.random.default_rng(0)
    cls_words_sep = [0x85] + [i % 15 for i in range(10)] + [0x85]
    seed("bert_like", 2, 3, 2, True, True, cls_words_sep, rng.integers(0, 255, 500, dtype=np.uint8).tobytes())
    seed("causal", 1, 2, 1, False, True, list(range(12)), rng.integers(0, 255, 300, dtype=np.uint8).tobytes())
    T = 6
    uniform = np.full((1, 1, T, T), 1.0 / T, dtype=np.float32)
    seed("raw_uniform", 1, 1, 2, False, False, list(range(T)), uniform.tobytes())
    lower = np.tril(np.ones((T, T), dtype=np.float32))
    seed("raw_causal", 1, 1, 0, False, False, list(range(T)), (lower / lower.sum(1, keepdims=True)).tobytes())
    seed("raw_nan", 1, 1, 2, False, False, [1, 2, 3], np.array([np.nan, 0.5, 0.5] * 3, dtype=np.float32).tobytes())


def charsmap(rules) -> bytes:
    """A SentencePiece precompiled_charsmap (src/tokenizer/precompiled.h has the layout): each trie
    node placed at the first offset where its children (node ^ offset ^ byte) and its value
    (node ^ offset) land on free units."""
    trie, normalized = {}, b""
    for key, value in sorted(rules.items()):
        node = trie
        for b in key.encode():
            node = node.setdefault(b, {})
        node[None] = len(normalized)
        normalized += value.encode() + b"\0"
    units, used, todo = {}, {0}, [(trie, 0)]
    while todo:
        node, pos = todo.pop()
        offset = 1
        while any((pos ^ offset ^ (0 if b is None else b)) in used for b in node):
            offset += 1
        units[pos] = units.get(pos, 0) | (offset << 10) | ((1 << 8) if None in node else 0)
        for b, child in node.items():
            at = pos ^ offset ^ (0 if b is None else b)
            used.add(at)
            if b is None:
                units[at] = (1 << 31) | child
            else:
                units[at] = b
                todo.append((child, at))
    n = max(units) + 1
    return struct.pack(f"<I{n}I", 4 * n, *(units.get(i, 0) for i in range(n))) + normalized


def sentences(n: int):
    out = []
    for line in (args.data / "ud/en_pud-ud-test.conllu").read_text().splitlines():
        if line.startswith("# text = "):
            out.append(line[len("# text = "):])
            if len(out) == n:
                break
    return out


# ---- chat templates ----
def template_seeds() -> None:
    import gguf

    path = next(args.decoder.glob("*.gguf"))
    reader = gguf.GGUFReader(str(path))
    real = reader.fields["tokenizer.chat_template"].contents()
    write("chat_template", "smollm2", real)
    write("chat_template", "loop", "{% for m in messages %}{{ loop.index0 }}:{{ m['role'] | trim }} {{ m.content }}\n{% endfor %}")
    write("chat_template", "set", "{% set s = 'a' %}{% if messages | length > 1 and not false %}{{ s ~ bos_token }}{% endif %}")


# ---- texts to encode, and the gold data readers ----
def data_seeds() -> None:
    for i, s in enumerate(sentences(40)):
        write("encode", f"pud_{i:02d}", s)
    gap_lines = (args.data / "gap/gap-development.tsv").read_text().splitlines()
    for i, line in enumerate(gap_lines[1:11]):
        write("encode", f"gap_{i:02d}", line.split("\t")[1])
    write("gap", "development", "\n".join(gap_lines[:6]) + "\n")
    write("gap", "validation", "\n".join((args.data / "gap/gap-validation.tsv").read_text().splitlines()[:4]) + "\n")
    for name in ("en_pud-ud-test", "en_ewt-ud-dev"):
        text = (args.data / f"ud/{name}.conllu").read_text()
        blocks = text.split("\n\n")
        write("conllu", name, "\n\n".join(blocks[:4]) + "\n\n")


# ---- raw HTTP requests, as the explorer sends them ----
def http_seeds() -> None:
    def post(path: str, body: dict) -> str:
        data = json.dumps(body)
        return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nOrigin: http://127.0.0.1:8080\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data.encode())}\r\n\r\n{data}")

    text = "The trophy didn't fit in the suitcase because it was too big."
    write("http", "get_model", "GET /api/model HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
    write("http", "get_health", "GET /api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    write("http", "get_index", "GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nRange: bytes=0-10\r\n\r\n")
    write("http", "run", post("/api/run", {"text": text, "level": "word"}))
    write("http", "attention", post("/api/attention", {"text": text, "layer": 2, "head": 8, "dtype": "uint8"}))
    write("http", "decompose", post("/api/decompose", {"text": text, "layer": 3, "token": 8}))
    write("http", "generate", post("/api/generate", {"text": text, "max_new_tokens": 2}))
    # A refused Host quoted in the 403's message: "HTTP/1.1 8080" in a body is not a status line.
    write("http", "host_quoted", "GET /api/model HTTP/1.1\r\nHost: 127.0.0.1:HTTP/1.1 8080\r\n\r\n")
    chunked = '{"text": "Heads attend."}'
    write("http", "chunked", "POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          f"Transfer-Encoding: chunked\r\n\r\n{len(chunked):x}\r\n{chunked}\r\n0\r\n\r\n")
    # The transport's own paths: requests pipelined in one input, many ranges, a control byte in
    # the path, a body invited with 100-continue.
    health = "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    write("http", "pipelined", health + "GET /api/model HTTP/1.1\r\nHost: localhost\r\n\r\n" + health)
    write("http", "ranges", "GET /api/model HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-0,1-1,2-2,3-\r\n\r\n")
    write("http", "control_path", "GET /index.html%00.js HTTP/1.1\r\nHost: localhost\r\n\r\n")
    body = '{"text": "Heads attend."}'
    write("http", "expect_continue", "POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          f"Expect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n{body}")


for make in (safetensors_seeds, gguf_seeds, config_seeds, tokenizer_seeds, precompiled_seeds, analyse_seeds, template_seeds,
             data_seeds, http_seeds):
    make()
for d in sorted(args.out.iterdir()):
    print(f"seeds: {d.name}: {len(list(d.iterdir()))} files, {sum(f.stat().st_size for f in d.iterdir())} bytes")
