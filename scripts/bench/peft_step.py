#!/usr/bin/env python3
"""Reference for `reverie bench train`: LoRA steps (forward + backward +
AdamW) with PyTorch + PEFT on CPU, loading the same GGUF through
transformers' GGUF loader, one warm-up and `--steps` measured. Prints one
JSON object for the median step."""
import argparse
import json
import os
import resource
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("--gguf", required=True)
p.add_argument("--len", type=int, required=True)
p.add_argument("--threads", type=int, required=True)
p.add_argument("--rank", type=int, default=16)
p.add_argument("--steps", type=int, default=1)
p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
a = p.parse_args()

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

torch.set_num_threads(a.threads)
torch.manual_seed(0)
folder, name = os.path.split(os.path.abspath(a.gguf))
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=getattr(torch, a.dtype))
targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
model = get_peft_model(model, LoraConfig(r=a.rank, lora_alpha=2 * a.rank, target_modules=targets, lora_dropout=0.0))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
vocab = model.config.vocab_size
ids = torch.tensor([[(5 + i * 7919) % (vocab - 10) for i in range(a.len)]])


def step():
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad()


step()  # warm-up
times = []
for _ in range(max(1, a.steps)):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
dt = sorted(times)[len(times) // 2]
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"tokens_per_s": a.len / dt, "seconds": dt, "step_seconds": times, "peak_rss": rss, "torch": torch.__version__, "dtype": a.dtype}))
