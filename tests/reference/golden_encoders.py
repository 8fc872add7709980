"""Goldens for the encoder families and for checkpoints saved bare or with a task head
(tests/unit/encoders_test.cc).

Tiny random-weight models built here by transformers with a fixed seed (nothing is downloaded),
saved as Hugging Face folders in the layout each class saves:
  - encoders: RoBERTa (RobertaForMaskedLM: "roberta." prefix, lm_head.* beside it), XLM-RoBERTa
    (XLMRobertaModel, bare), RoBERTa with a classifier (RobertaForSequenceClassification),
    DistilBERT (DistilBertForMaskedLM: "distilbert." prefix; and DistilBertModel bare with
    sinusoidal position embeddings), BERT bare (BertModel), BertForMaskedLM and
    BertForSequenceClassification;
  - decoders saved bare or with another head: LlamaModel, MistralModel, Qwen2Model (no "model."
    prefix, no lm_head), LlamaForSequenceClassification ("score" head, no lm_head), GPT2Model
    (no "transformer." prefix).
Each folder gets the small byte-level BPE tokenizer of golden_decoders.py so that it loads; the
tests feed token ids (the XLM-R model is checked by ids: its Unigram vocabulary is a tokenizer
matter). For each prompt we store attentions [n_layer, n_head, T, T] and hidden states
[n_layer + 1, T, d_model] as transformers computes them (PyTorch, CPU, fp32, eager attention).

Layout under out_dir/encoders/<model>/golden/ is that of golden_decoders.py (manifest.json, *.f32).
"""
import json
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_decoders import save_tensor, train_tokenizer  # noqa: E402

# Token ids, not texts. The second prompt holds id 1 (RoBERTa's padding id) in the middle: RoBERTa
# gives such a token the padding position and does not advance the count of real positions.
PROMPTS = [
    [0, 45, 112, 87, 260, 33, 19, 301, 77, 150, 64, 2, 0],
    [0, 71, 1, 203, 9, 1, 1, 180, 55, 2],
]


def randomize(model, seed):
    """Larger random weights than the default init (std 0.02 makes attention nearly uniform), so
    that heads are peaked and a wrong position or layout shows; norms stay near 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "position_embeddings" in name and getattr(model.config, "sinusoidal_pos_embds", False):
                continue  # fixed sinusoids, not trained weights
            lname = name.lower()
            if p.dim() == 1 and ("norm" in lname or ".ln_" in lname or "layer_norm" in lname):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))


def build_models(vocab_size):
    import transformers as tf
    bert = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=64, attn_implementation="eager")
    roberta = dict(bert, pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1,
                   max_position_embeddings=40)
    distil = dict(vocab_size=vocab_size, dim=64, hidden_dim=96, n_layers=2, n_heads=4, max_position_embeddings=64,
                  attn_implementation="eager")
    dec = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5,
               pad_token_id=0, attn_implementation="eager")
    return {
        "roberta_mlm": (tf.RobertaForMaskedLM, tf.RobertaConfig(**roberta)),
        "roberta_cls": (tf.RobertaForSequenceClassification, tf.RobertaConfig(**roberta, num_labels=3)),
        "xlm_roberta": (tf.XLMRobertaModel, tf.XLMRobertaConfig(**roberta)),
        "distilbert_mlm": (tf.DistilBertForMaskedLM, tf.DistilBertConfig(**distil)),
        "distilbert_sinusoidal": (tf.DistilBertModel, tf.DistilBertConfig(**distil, sinusoidal_pos_embds=True)),
        "bert_bare": (tf.BertModel, tf.BertConfig(**bert)),
        "bert_mlm": (tf.BertForMaskedLM, tf.BertConfig(**bert)),
        "bert_cls": (tf.BertForSequenceClassification, tf.BertConfig(**bert, num_labels=2)),
        "llama_bare": (tf.LlamaModel, tf.LlamaConfig(**dec, head_dim=16)),
        "llama_cls": (tf.LlamaForSequenceClassification, tf.LlamaConfig(**dec, head_dim=16, num_labels=2)),
        "mistral_bare": (tf.MistralModel, tf.MistralConfig(**dec, head_dim=16)),
        "qwen2_bare": (tf.Qwen2Model, tf.Qwen2Config(**dec)),
        "gpt2_bare": (tf.GPT2Model, tf.GPT2Config(vocab_size=vocab_size, n_embd=64, n_layer=2, n_head=4,
                                                  n_positions=128, n_inner=96, bos_token_id=0, eos_token_id=0,
                                                  attn_implementation="eager")),
    }


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    torch.set_num_threads(2)
    out = out_dir / "encoders"
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(bos=False)
    vocab_size = tok.get_vocab_size()
    for seed, (name, (cls, cfg)) in enumerate(build_models(vocab_size).items()):
        torch.manual_seed(3000 + seed)
        model = cls(cfg)
        randomize(model, 4000 + seed)
        model.eval()
        d = out / name
        model.save_pretrained(d, safe_serialization=True)
        tok.save(str(d / "tokenizer.json"))
        golden = d / "golden"
        golden.mkdir(parents=True, exist_ok=True)
        prompts = []
        for p, ids in enumerate(PROMPTS):
            with torch.no_grad():
                decoder = name.split("_")[0] in ("llama", "mistral", "qwen2", "gpt2")
                kwargs = {"use_cache": False} if decoder else {}
                o = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True, **kwargs)
            tensors = {}
            save_tensor(golden, tensors, f"p{p}_attention", torch.stack([a[0] for a in o.attentions]))
            save_tensor(golden, tensors, f"p{p}_hidden_states", torch.stack([h[0] for h in o.hidden_states]))
            prompts.append({"ids": ids, "tensors": tensors})
        (golden / "manifest.json").write_text(json.dumps({"class": cls.__name__, "prompts": prompts}, indent=1))


if __name__ == "__main__":
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
