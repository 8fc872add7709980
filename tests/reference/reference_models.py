"""What the decoder golden scripts share (golden_decoders.py, golden_gemma.py, golden_phi_olmo.py):
the prompts and the small tokenizer, the random weights, saving each tiny model as a Hugging Face
folder with what transformers computes for it, the bare and sequence-classification twins of a
model, and the tokenizer part of a GGUF. Not a golden_*.py module itself: make_goldens.py runs
those, and re-runs one only when its own source changes.

Goldens under <out>/<model>/golden/: manifest.json {"prompts": [{"text", "ids", "tensors": {name:
{"file", "shape"}}, "greedy"}]} and little-endian float32 *.f32 files in C order.
"""
import copy
import json
import pathlib

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"

PROMPTS = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "In 1999, she wrote: \"it's over\" -- and left.",
]


def train_tokenizer(bos: bool):
    """A small byte-level BPE (vocabulary 320) trained on UD English sentences."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    lines = [l[len("# text = "):].strip() for l in open(DATA / "ud" / "en_ewt-ud-dev.conllu", encoding="utf-8")
             if l.startswith("# text = ")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      show_progress=False))
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A",
                                                           special_tokens=[("<|endoftext|>", 0)])
    return tok


def randomize(model, seed):
    """Replaces the default init (std 0.02, which makes every attention row nearly uniform) by
    larger random weights, so that heads are peaked and a wrong mask or layout shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or ".ln_" in name or name.startswith("transformer.ln_f")):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def save_tensor(golden_dir, manifest_tensors, name, tensor):
    array = np.ascontiguousarray(tensor.detach().to(torch.float32).numpy())
    path = golden_dir / f"{name}.f32"
    array.astype("<f4").tofile(path)
    manifest_tensors[name] = {"file": path.name, "shape": list(array.shape)}


def run_reference(model, ids_list, golden_dir, texts):
    golden_dir.mkdir(parents=True, exist_ok=True)
    prompts = []
    for p, (text, ids) in enumerate(zip(texts, ids_list)):
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True, use_cache=False)
        tensors = {}
        save_tensor(golden_dir, tensors, f"p{p}_attention", torch.stack([a[0] for a in out.attentions]))
        save_tensor(golden_dir, tensors, f"p{p}_hidden_states", torch.stack([h[0] for h in out.hidden_states]))
        save_tensor(golden_dir, tensors, f"p{p}_logits", out.logits[0])
        # Greedy continuation (what `headscope generate` does with its KV cache).
        with torch.no_grad():
            # An explicit mask: BOS shares id 0 with the pad token, which generate() would otherwise mask.
            generated = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       max_new_tokens=8, do_sample=False, min_new_tokens=8, pad_token_id=0,
                                       eos_token_id=None)
        prompts.append({"text": text, "ids": list(ids), "tensors": tensors,
                        "greedy": generated[0, len(ids):].tolist()})
    (golden_dir / "manifest.json").write_text(json.dumps({"prompts": prompts}, indent=1))


def save_models(out, specs, tokenizer_of, model_seed, weight_seed):
    """Each {name: (class, config)} of `specs`, in order: built with torch seed model_seed + i,
    given random weights (randomize, seed weight_seed + i), saved to out/name with the tokenizer
    tokenizer_of(name) and the goldens of PROMPTS. Yields (name, model, tokenizer, folder)."""
    for i, (name, (cls, cfg)) in enumerate(specs.items()):
        torch.manual_seed(model_seed + i)
        model = cls(cfg)
        randomize(model, weight_seed + i)
        model.eval()
        d = out / name
        model.save_pretrained(d, safe_serialization=True)
        tok = tokenizer_of(name)
        tok.save(str(d / "tokenizer.json"))
        run_reference(model, [tok.encode(t).ids for t in PROMPTS], d / "golden", PROMPTS)
        yield name, model, tok, d


def save_other_layouts(out, name, model, tok, classifier=None):
    """The weights of `model` (a *ForCausalLM) as two other classes save them, for checkpoints
    people bring: out/<name>_bare, the bare *Model (model.model.save_pretrained: no "model." prefix,
    no lm_head), and, given a *ForSequenceClassification class, out/<name>_cls ("model." prefix, a
    "score" head, no lm_head). Their attention and hidden states are those of out/<name>/golden."""
    model.model.save_pretrained(out / f"{name}_bare", safe_serialization=True)
    tok.save(str(out / f"{name}_bare" / "tokenizer.json"))
    if classifier is not None:
        cls = classifier(copy.deepcopy(model.config))
        cls.model.load_state_dict(model.model.state_dict())
        cls.save_pretrained(out / f"{name}_cls", safe_serialization=True)
        tok.save(str(out / f"{name}_cls" / "tokenizer.json"))


def finish_gguf(w, tok_json, add_bos):
    """Writes the byte-level BPE vocabulary as llama.cpp stores it (tokenizer.ggml.*), then the file."""
    vocab = tok_json["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    specials = {a["id"] for a in tok_json["added_tokens"] if a["special"]}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in specials else 1 for i in range(len(tokens))])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in tok_json["model"]["merges"]])
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(add_bos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
