"""Fault-injection trainer for the sentinel's real recordings.

Trains an MLP on scikit-learn's digits one batch per step, under the Niuma
stage contract (NIUMA_RUN_DIR, NIUMA_SEED, params.json), and prints one
metrics line per step on stdout ({"step", "loss", "grad_norm"}), like the
demo's train.py does per epoch. A sampler thread records the process's own
utilisation telemetry every 100 ms into <run dir>/telemetry.jsonl:
{"t": seconds, "util": percent, "mem_mib": resident MiB, "step": N}.
This machine has no GPU, so the CPU stands in for the accelerator. "util"
is the duty cycle of the compute (the share of the last 100 ms the loop
spent in forward, backward and the optimizer step), which is what a GPU's
utilisation counter reports (a kernel was running), and it does not drop
when other processes take the CPU: a data loader that sleeps, or a loop
blocked on a lost peer, leaves it idle as it would a GPU. A tensor list
that grows leaks memory the same way a GPU leak would (host RSS instead of
device memory).

params.json: {"mode": "healthy" | "loader_sleep" | "leak" | "hang" | "plateau"
| "spike", "steps": N, "onset": N, "wall": true|false}
  loader_sleep: the loader sleeps 0.5 s every 10th batch from step onset on.
  leak: every step from onset on keeps a 1 MiB tensor in a list forever.
  hang: before step onset the loop blocks on an event nobody sets (a lost
        peer, a dead DataLoader worker) for "hang_s" seconds (default 200),
        alive and silent, then goes on.
  plateau: from step onset the learning rate is 0 (a schedule that decayed
        to nothing): the loss stops improving and only batch noise is left.
  spike: steps onset .. onset+"width"-1 (default 1) train on a corrupt batch
        (inputs ×20, labels shuffled), as a bad shard would give.
  "onset": the first faulty step (default 0).
  "wall": add "t", seconds since the start, to every metrics line, so that
        time-based detectors (hang) can be replayed, and print the params
        first as a log line ("fault: {...}"), the recording's label.
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
wall = bool(p.get("wall", False))
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


busy = {"total": 0.0, "since": None}  # seconds in compute, and the start of the current stretch
busy_lock = threading.Lock()


def busy_now():
    with busy_lock:
        b = busy["total"]
        if busy["since"] is not None:
            b += time.monotonic() - busy["since"]
        return b


def compute(on):
    with busy_lock:
        if on:
            busy["since"] = time.monotonic()
        elif busy["since"] is not None:
            busy["total"] += time.monotonic() - busy["since"]
            busy["since"] = None


def sampler():
    last_w, last_c = time.monotonic(), busy_now()
    while not stop.wait(0.1):
        w, c = time.monotonic(), busy_now()
        util = max(0.0, min(100.0, 100.0 * (c - last_c) / max(w - last_w, 1e-9)))
        last_w, last_c = w, c
        tel.write(json.dumps({"t": round(w - t0, 3), "util": round(util, 1),
                              "mem_mib": round(rss_mib(), 1), "step": state["step"]}) + "\n")


if wall:  # a log line (not a metrics object) that labels the recording
    print("fault: " + json.dumps(p, sort_keys=True), flush=True)
th = threading.Thread(target=sampler, daemon=True)
th.start()
kept = []
for step in range(1, steps + 1):
    state["step"] = step
    if mode == "loader_sleep" and step >= onset and step % 10 == 0:
        time.sleep(0.5)  # the slow data loader
    if mode == "hang" and step == onset:
        threading.Event().wait(float(p.get("hang_s", 200)))  # never set: a hang
    if mode == "plateau" and step == onset:
        for g in opt.param_groups:
            g["lr"] = 0.0
    idx = torch.from_numpy(rng.integers(0, len(X), 512))
    xb, yb = X[idx], y[idx]
    if mode == "spike" and onset <= step < onset + int(p.get("width", 1)):
        xb, yb = xb * 20, yb[torch.randperm(len(yb))]  # a corrupt batch
    compute(True)
    opt.zero_grad()
    out = model(xb)
    loss = loss_fn(out, yb)
    loss.backward()
    gn = float(torch.sqrt(sum((q.grad ** 2).sum() for q in model.parameters())))
    opt.step()
    compute(False)
    if mode == "leak" and step >= onset:
        kept.append(torch.ones(256 * 1024))  # 1 MiB kept forever: the leak
    line = {"step": step, "loss": float(loss), "grad_norm": gn}
    if wall:
        line["t"] = round(time.monotonic() - t0, 3)
    print(json.dumps(line), flush=True)
stop.set()
th.join()
tel.close()
