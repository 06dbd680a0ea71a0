"""The measurements of scripts/gpu-check, printed as one JSON object.

Each part is recorded even when another fails: a failure is the part's
`error` (its command's stderr tail), never a missing key.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

TEXT = (
    "<|im_start|>user\nWhat is 17 times 23? Show the steps.<|im_end|>\n"
    "<|im_start|>assistant\n17 times 23 is 17 times 20 plus 17 times 3, "
    "that is 340 plus 51, which is 391.<|im_end|>\n"
)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_json(cmd, timeout):
    """The last stdout line of `cmd` as JSON."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class PeakGpuMemory:
    """Samples nvidia-smi every 100 ms while in use; `peak_mib` after."""

    def __enter__(self):
        self.peak_mib = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    def sample(self):
        while not self.stop.is_set():
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            )
            for line in out.stdout.split():
                if line.strip().isdigit():
                    self.peak_mib = max(self.peak_mib, int(line))
            time.sleep(0.1)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def part(report, key, f):
    log(f"gpu-check: {key}")
    t0 = time.time()
    try:
        report[key] = f()
    except Exception as e:  # recorded, and the other parts still run
        report[key] = {"error": str(e)[-2000:]}
    report[key]["seconds"] = round(time.time() - t0, 1)


def parity(bin_, model, text_file):
    theirs = run_json([bin_, "logprobs", "--model", model, "--text", text_file, "--json"], 600)
    ours = run_json(
        [bin_, "logprobs", "--engine", "train", "--device", "cuda", "--model", model,
         "--text", text_file, "--json"],
        600,
    )
    a, b = theirs["logprobs"], ours["logprobs"]
    diffs = [abs(x - y) for x, y in zip(a, b)]
    return {
        "tokens": len(diffs),
        "mean_abs_nats": sum(diffs) / max(len(diffs), 1),
        "max_abs_nats": max(diffs, default=0.0),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--home", required=True)
    a = ap.parse_args()
    bin_, home = a.bin, a.home
    default = run_json([bin_, "--home", home, "model", "list", "--json"], 60)
    model = next(m["path"] for m in default["models"] if m.get("active"))
    report = {
        "gpu": subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True,
        ).stdout.strip(),
        "parity": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "text.txt")
        with open(text_file, "w") as f:
            f.write(TEXT)
        for arch in ["llama", "qwen2", "qwen3", "gemma3"]:
            path = os.path.join(tmp, f"{arch}.gguf")
            subprocess.run([bin_, "model", "synth", "--arch", arch, "--out", path],
                           check=True, capture_output=True)
            part(report["parity"], arch, lambda: parity(bin_, path, text_file))
        part(report["parity"], "default", lambda: parity(bin_, model, text_file))

    def step(tokens):
        def f():
            with PeakGpuMemory() as mem:
                r = run_json([bin_, "bench", "train-step", "--model", model, "--len",
                              str(tokens), "--warmup", "0", "--device", "cuda"], 3600)
            r["peak_gpu_mib"] = mem.peak_mib
            return r
        return f

    part(report, "step_2048", step(2048))
    part(report, "step_24576", step(24576))

    def night():
        out = run_json([bin_, "--home", home, "sleep", "--json", "--gpu-layers", "99",
                        "--practice", "arithmetic:8"], 7200)
        return {"outcome": out}

    part(report, "practice_night", night)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
