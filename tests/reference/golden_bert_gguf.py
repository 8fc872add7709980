"""Goldens for BERT read from GGUF (tests/unit/bert_gguf_test.cc), converted by llama.cpp's own
convert_hf_to_gguf.py, not by a writer of ours.

The converter and its gguf-py come from the llama-cpp-python source package that scripts/setup.sh
keeps under .venv/share/llama-cpp-python/ (it vendors llama.cpp); the three parts it needs are
unpacked once into <out>/bert_gguf/llama.cpp/. Under <out>/bert_gguf/:

  tiny_bert/            a tiny random BertModel built by transformers (fixed seed, MiniLM's
                        WordPiece tokenizer beside it), as a Hugging Face folder
  tiny_bert.gguf        the same, converted with --outtype f32
  minilm-f32.gguf       the default model (all-MiniLM-L6-v2) converted with --outtype f32
  minilm-q8_0.gguf      and with --outtype q8_0 (each conversion starts torch: ~20 s on an idle machine)
  tiny_roberta/         a tiny random RobertaModel (the layout of golden_encoders.py's, pad_token_id 1,
                        130 position rows: the texts run to ~70 tokens) over a small byte-level BPE trained here with RoBERTa's
                        specials <s> <pad> </s> <unk> <mask> and RobertaProcessing (<s> $A </s>)
  tiny_roberta.gguf     the same, converted with --outtype f32. The converter names a BPE
                        pre-tokenizer by hashing its tokens for a fixed text and knows only published
                        vocabularies, so the conversion runs with get_vocab_base_pre answering
                        "roberta-bpe" (what it answers for roberta-base); nothing else is changed
  tiny_distilbert/      a tiny random DistilBertModel over MiniLM's WordPiece tokenizer, and
  tiny_distilbert.gguf  converted with --outtype f32: "bert" with no token_types tensor and
                        tokenizer.ggml.token_type_count 1 (DistilBertConfig has no type_vocab_size)
  tiny_xlmr/            a tiny random XLMRobertaModel (golden_encoders.py's layout, pad_token_id 1, 130
                        position rows) over a SentencePiece Unigram model (vocabulary 1,000, rule
                        nmt_nfkc) trained here by golden_precompiled.train_model: its
                        sentencepiece.bpe.model, which the converter reads, and the tokenizer.json
                        transformers' XLM-R converter makes of it (golden_precompiled.xlmr_tokenizer);
                        cases.json: that tokenizer's ids, byte offsets and words for
                        golden_precompiled's ~2,400 strings
  tiny_xlmr.gguf        the same, converted with --outtype f32 (a "t5" vocabulary with the charsmap)
  golden/manifest.json  per model ("tiny_bert", "minilm", "tiny_roberta", "tiny_distilbert", "tiny_xlmr"): the
                        texts, the ids transformers' tokenizer gives them, and *.f32 attention [n_layer, n_head, T, T] and
                        hidden states [n_layer + 1, T, d_model] from transformers (fp32, eager)
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_decoders import save_tensor  # noqa: E402
from golden_encoders import randomize  # noqa: E402

LLAMA_CPP_PYTHON = "0.3.36"  # the version scripts/setup.sh downloads
TEXTS = [
    "The cat sat on the mat because it was tired.",
    "Attention heads in BERT often attend to [SEP] and to the next token, unbelievably.",
    "Zürich's café served crème brûlée; 北京 hosted 2,048 visitors!",
]
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]


def converter(out: pathlib.Path) -> pathlib.Path:
    """The vendored llama.cpp folder holding convert_hf_to_gguf.py, conversion/ and gguf-py/."""
    root = out / "llama.cpp"
    if (root / "convert_hf_to_gguf.py").exists():
        return root
    sdist = pathlib.Path(sys.prefix) / "share" / "llama-cpp-python" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not sdist.exists():
        raise SystemExit(f"golden_bert_gguf: {sdist} is missing; run scripts/setup.sh (it downloads llama-cpp-python's "
                         "source package, which carries llama.cpp's GGUF converter)")
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
    wanted = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/gguf/")
    tmp = out / "llama.cpp.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        members = []
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith(prefix) and m.name[len(prefix):].startswith(wanted):
                m.name = m.name[len(prefix):]
                members.append(m)
        tar.extractall(tmp, members=members, filter="data")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    return root


def convert(root: pathlib.Path, model_dir: pathlib.Path, outtype: str, outfile: pathlib.Path, pre: str = "") -> None:
    """Runs the converter; `pre` (when given) is the BPE pre-tokenizer name to record for a vocabulary
    whose hash the converter does not know."""
    t0 = time.time()
    env = {"PYTHONPATH": str(root / "gguf-py"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    args = [str(model_dir), "--outtype", outtype, "--outfile", str(outfile)]
    if pre:
        script = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); from conversion import base; "
                  f"base.TextModel.get_vocab_base_pre = lambda self, tokenizer: {pre!r}; "
                  "sys.argv = [sys.argv[1] + '/convert_hf_to_gguf.py'] + sys.argv[2:]; "
                  "runpy.run_path(sys.argv[0], run_name='__main__')")
        command = [sys.executable, "-c", script, str(root)] + args
    else:
        command = [sys.executable, str(root / "convert_hf_to_gguf.py")] + args
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    print(f"goldens: converted {model_dir.name} to {outfile.name} ({outtype}) in {time.time() - t0:.1f}s", flush=True)


def reference(model, tokenizer, golden: pathlib.Path, tag: str) -> list:
    prompts = []
    for p, text in enumerate(TEXTS):
        ids = tokenizer(text)["input_ids"]
        with torch.no_grad():
            o = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
        tensors = {}
        save_tensor(golden, tensors, f"{tag}_p{p}_attention", torch.stack([a[0] for a in o.attentions]))
        save_tensor(golden, tensors, f"{tag}_p{p}_hidden_states", torch.stack([h[0] for h in o.hidden_states]))
        prompts.append({"text": text, "ids": ids, "tensors": tensors})
    return prompts


def roberta_tokenizer():
    """A small byte-level BPE (vocabulary 320) with RoBERTa's specials and template, trained on UD
    English sentences as golden_decoders.py's is."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from reference_models import DATA
    lines = [l[len("# text = "):].strip() for l in open(DATA / "ud" / "en_ewt-ud-dev.conllu", encoding="utf-8")
             if l.startswith("# text = ")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=320, special_tokens=["<s>", "<pad>", "</s>", "<unk>",
                                                                                       "<mask>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      show_progress=False))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=False)
    return tok


def tiny_roberta(root: pathlib.Path, out: pathlib.Path, golden: pathlib.Path) -> list:
    import transformers as tf
    tiny = out / "tiny_roberta"
    tiny.mkdir(parents=True, exist_ok=True)
    tok = roberta_tokenizer()
    tok.save(str(tiny / "tokenizer.json"))
    (tiny / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "RobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>",
        "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>",
        "add_prefix_space": False}))
    cfg = tf.RobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=4, max_position_embeddings=130, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2, type_vocab_size=1, attn_implementation="eager")
    torch.manual_seed(5200)
    model = tf.RobertaModel(cfg, add_pooling_layer=False)
    randomize(model, 5201)
    model.eval()
    model.save_pretrained(tiny, safe_serialization=True)
    convert(root, tiny, "f32", out / "tiny_roberta.gguf", pre="roberta-bpe")
    return reference(model, tf.AutoTokenizer.from_pretrained(str(tiny)), golden, "tiny_roberta")


def tiny_xlmr(root: pathlib.Path, out: pathlib.Path, golden: pathlib.Path) -> list:
    import importlib.util
    import transformers as tf
    spec = importlib.util.spec_from_file_location("golden_precompiled", pathlib.Path(__file__).with_name(
        "golden_precompiled.py"))
    gp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gp)
    tiny = out / "tiny_xlmr"
    tiny.mkdir(parents=True, exist_ok=True)
    # The first 1,500 sentences: training on all 4,028 takes ~4 s instead of ~0.3 s.
    blob = gp.train_model(gp.sp.bpe.training_corpus()[:1500], "nmt_nfkc", vocab_size=1000)
    (tiny / "sentencepiece.bpe.model").write_bytes(blob)
    tok = gp.xlmr_tokenizer(blob)
    tok.save(str(tiny / "tokenizer.json"))
    (tiny / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>",
        "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"}))
    (tiny / "cases.json").write_text(json.dumps(gp.sp.cases_from(tok, gp.strings()), ensure_ascii=False))
    cfg = tf.XLMRobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                              num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=130, pad_token_id=1,
                              bos_token_id=0, eos_token_id=2, type_vocab_size=1, attn_implementation="eager")
    torch.manual_seed(5400)
    model = tf.XLMRobertaModel(cfg, add_pooling_layer=False)
    randomize(model, 5401)
    model.eval()
    model.save_pretrained(tiny, safe_serialization=True)
    convert(root, tiny, "f32", out / "tiny_xlmr.gguf")
    return reference(model, lambda text: {"input_ids": tok.encode(text).ids}, golden, "tiny_xlmr")


def tiny_distilbert(root: pathlib.Path, model_dir: pathlib.Path, out: pathlib.Path, golden: pathlib.Path) -> list:
    import transformers as tf
    tokenizer = tf.AutoTokenizer.from_pretrained(str(model_dir))
    tiny = out / "tiny_distilbert"
    cfg = tf.DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=64, hidden_dim=96, n_layers=2, n_heads=4,
                              max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(5300)
    model = tf.DistilBertModel(cfg)
    randomize(model, 5301)
    model.eval()
    model.save_pretrained(tiny, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(model_dir / name, tiny / name)
    convert(root, tiny, "f32", out / "tiny_distilbert.gguf")
    return reference(model, tokenizer, golden, "tiny_distilbert")


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    import transformers as tf
    torch.set_num_threads(2)
    out = out_dir / "bert_gguf"
    out.mkdir(parents=True, exist_ok=True)
    root = converter(out)
    golden = out / "golden"
    golden.mkdir(parents=True, exist_ok=True)
    tokenizer = tf.AutoTokenizer.from_pretrained(str(model_dir))

    # A tiny random BertModel over MiniLM's vocabulary (the converter recognises its tokenizer).
    tiny = out / "tiny_bert"
    cfg = tf.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(5100)
    model = tf.BertModel(cfg)
    randomize(model, 5101)
    model.eval()
    model.save_pretrained(tiny, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(model_dir / name, tiny / name)
    convert(root, tiny, "f32", out / "tiny_bert.gguf")
    manifest = {"converter": f"llama-cpp-python {LLAMA_CPP_PYTHON} convert_hf_to_gguf.py",
                "tiny_bert": reference(model, tokenizer, golden, "tiny_bert")}

    minilm = tf.AutoModel.from_pretrained(str(model_dir), attn_implementation="eager", dtype=torch.float32).eval()
    manifest["minilm"] = reference(minilm, tokenizer, golden, "minilm")
    for outtype in ("f32", "q8_0"):
        convert(root, model_dir, outtype, out / f"minilm-{outtype}.gguf")
    manifest["tiny_roberta"] = tiny_roberta(root, out, golden)
    manifest["tiny_distilbert"] = tiny_distilbert(root, model_dir, out, golden)
    manifest["tiny_xlmr"] = tiny_xlmr(root, out, golden)
    (golden / "manifest.json").write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
