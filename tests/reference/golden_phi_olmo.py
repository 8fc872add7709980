"""Goldens for Phi-3 and OLMo 2 (tests/unit/decoders_more_test.cc), in golden_decoders.py's layout.

Tiny random-weight models built by transformers with a fixed seed (nothing is downloaded):
  phi3   fused qkv_proj and gate_up_proj, partial_rotary_factor 0.5 (8 of 16 head dimensions
         rotated), sliding window 5 over every layer, query/KV ratio 2
  olmo2  output norms instead of pre-norms, QK-norm over the whole q and k projections, ratio 2
Both are also written as GGUF the way llama.cpp's convert_hf_to_gguf.py does (Phi3MiniModel,
Olmo2Model): tensors copied under llama.cpp's names, fused rows kept fused, Q/K rows unpermuted
(llama.cpp runs both with NEOX RoPE), phi3.rope.dimension_count = the rotated width.
"""
import json
import pathlib
import sys

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_models as dec  # noqa: E402


def build_models(vocab_size):
    from transformers import Olmo2Config, Olmo2ForCausalLM, Phi3Config, Phi3ForCausalLM
    common = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=0,
                  pad_token_id=0, num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
                  attn_implementation="eager")
    return {
        "phi3": (Phi3ForCausalLM, Phi3Config(partial_rotary_factor=0.5, sliding_window=5, **common)),
        "olmo2": (Olmo2ForCausalLM, Olmo2Config(**common)),
    }


# Hugging Face layer tensor -> llama.cpp name, per architecture.
LAYER_NAMES = {
    "phi3": {"input_layernorm": "attn_norm", "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"},
    "olmo2": {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
              "post_attention_layernorm": "post_attention_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down", "post_feedforward_layernorm": "post_ffw_norm"},
}


def write_gguf(path, arch, model, tok_json):
    import gguf
    cfg = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    L, D, H, Hkv = cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    Dh = D // H
    rope = cfg.rope_parameters
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(path.stem)
    w.add_block_count(L)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(D)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_rope_dimension_count(int(Dh * rope.get("partial_rotary_factor", 1.0)))
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if getattr(cfg, "sliding_window", None):
        w.add_sliding_window(cfg.sliding_window)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for l in range(L):
        for hf, gg in LAYER_NAMES[arch].items():
            w.add_tensor(f"blk.{l}.{gg}.weight", np.ascontiguousarray(sd[f"model.layers.{l}.{hf}.weight"]))
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    dec.finish_gguf(w, tok_json, True)


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    torch.set_num_threads(2)
    out = out_dir / "decoders"
    out.mkdir(parents=True, exist_ok=True)
    tok = dec.train_tokenizer(bos=True)
    import transformers as tf
    classifiers = {"phi3": tf.Phi3ForSequenceClassification, "olmo2": tf.Olmo2ForSequenceClassification}
    for name, model, tok, d in dec.save_models(out, build_models(tok.get_vocab_size()), lambda name: tok, 5000, 6000):
        write_gguf(out / f"{name}.gguf", name, model, json.loads(tok.to_str()))
        # Bare *Model and *ForSequenceClassification twins.
        dec.save_other_layouts(out, name, model, tok, classifiers[name])

if __name__ == "__main__":
    import sys
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
