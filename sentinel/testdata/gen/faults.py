"""Fault-injection trainer for the sentinel's real recordings.

Trains an MLP on scikit-learn's digits one batch per step, under the Niuma
stage contract (NIUMA_RUN_DIR, NIUMA_SEED, params.json), and prints one
metrics line per step on stdout ({"step", "loss", "grad_norm"}), like the
demo's train.py does per epoch. A sampler thread records the process's own
utilisation telemetry every 100 ms into <run dir>/telemetry.jsonl:
{"t": seconds, "util": percent of one core busy, "mem_mib": resident MiB}.
This machine has no GPU, so the CPU stands in for the accelerator: a data
loader that sleeps leaves the compute idle exactly as it would a GPU, and a
tensor list that grows leaks memory the same way (host RSS instead of
device memory).

params.json: {"mode": "healthy" | "loader_sleep" | "leak", "steps": N}
  loader_sleep: the loader sleeps 0.5 s every 10th batch from step onset on.
  leak: every step from onset on keeps a 1 MiB tensor in a list forever.
  "onset": the first faulty step (default 0).
"""
import json
import os
import resource
import sys
import threading
import time

import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import load_digits

torch.set_num_threads(1)
run_dir = os.environ["NIUMA_RUN_DIR"]
seed = int(os.environ.get("NIUMA_SEED", "0"))
with open(os.path.join(run_dir, "params.json")) as f:
    p = json.load(f)
mode, steps, onset = p.get("mode", "healthy"), int(p.get("steps", 300)), int(p.get("onset", 0))
torch.manual_seed(seed)
rng = np.random.default_rng(seed)

X, y = load_digits(return_X_y=True)
X = torch.tensor((X - X.mean(0)) / (X.std(0) + 1e-6), dtype=torch.float32)
y = torch.tensor(y)
model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

t0 = time.monotonic()
stop = threading.Event()
tel = open(os.path.join(run_dir, "telemetry.jsonl"), "w")
state = {"step": 0}


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def sampler():
    last_w, last_c = time.monotonic(), time.process_time()
    while not stop.wait(0.1):
        w, c = time.monotonic(), time.process_time()
        util = max(0.0, min(100.0, 100.0 * (c - last_c) / max(w - last_w, 1e-9)))
        last_w, last_c = w, c
        tel.write(json.dumps({"t": round(w - t0, 3), "util": round(util, 1),
                              "mem_mib": round(rss_mib(), 1), "step": state["step"]}) + "\n")


th = threading.Thread(target=sampler, daemon=True)
th.start()
kept = []
for step in range(1, steps + 1):
    state["step"] = step
    if mode == "loader_sleep" and step >= onset and step % 10 == 0:
        time.sleep(0.5)  # the slow data loader
    idx = torch.from_numpy(rng.integers(0, len(X), 512))
    opt.zero_grad()
    out = model(X[idx])
    loss = loss_fn(out, y[idx])
    loss.backward()
    gn = float(torch.sqrt(sum((q.grad ** 2).sum() for q in model.parameters())))
    opt.step()
    if mode == "leak" and step >= onset:
        kept.append(torch.ones(256 * 1024))  # 1 MiB kept forever: the leak
    print(json.dumps({"step": step, "loss": float(loss), "grad_norm": gn}), flush=True)
stop.set()
th.join()
tel.close()
