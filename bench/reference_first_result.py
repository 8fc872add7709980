"""What a Python user runs to see one text's attention with transformers: import, load the
model and tokenizer, run with output_attentions=True, print the shape. bench/run.py times this
whole process against `headscope run` on the same text."""
import sys

import torch
import transformers

model_dir, text = sys.argv[1], sys.argv[2]
model = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
tok = transformers.AutoTokenizer.from_pretrained(model_dir)
with torch.inference_mode():
    out = model(**tok(text, return_tensors="pt"), output_attentions=True)
att = torch.stack(out.attentions)
print("attention", tuple(att.shape), "max", float(att.max()))
