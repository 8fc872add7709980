"""Makes a randomly initialised copy of a Hugging Face model: same config.json, fresh weights drawn
by transformers' own initialiser under a fixed seed, saved as safetensors, with the tokenizer files
copied unchanged. The atlas uses it as a control: whatever a head "does" in the copy comes from the
architecture and the data (positions, special tokens), not from training.

    .venv/bin/python scripts/make_random_model.py [--src models/all-MiniLM-L6-v2]
        [--dst models/all-MiniLM-L6-v2-random] [--seed 0]

Runs offline (HF_HUB_OFFLINE=1); nothing is downloaded.
"""
import argparse
import os
import pathlib
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoConfig, AutoModel  # noqa: E402

TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
                   "merges.txt", "vocab.json", "tokenizer.model"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=pathlib.Path, default=pathlib.Path("models/all-MiniLM-L6-v2"))
    ap.add_argument("--dst", type=pathlib.Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    dst = args.dst or args.src.with_name(args.src.name + "-random")
    if not (args.src / "config.json").exists():
        raise SystemExit(f"{args.src}: no config.json; run scripts/setup.sh to fetch the default model first")

    torch.manual_seed(args.seed)
    config = AutoConfig.from_pretrained(args.src)
    model = AutoModel.from_config(config)  # the architecture's own initialisation (normal, std = initializer_range)
    model.eval()
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dst, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (args.src / name).exists():
            shutil.copyfile(args.src / name, dst / name)
    print(f"{dst}: {config.model_type}, {config.num_hidden_layers} layers x {config.num_attention_heads} heads, "
          f"random weights (seed {args.seed})")


if __name__ == "__main__":
    main()
