"""Records the sentinel's training-run corpus: real PyTorch runs on this
machine's CPU, each printing one metrics line per logged point on stdout as a
stage does ({"step", "loss", "val_loss", "val_acc", "grad_norm", "lr"}), into
../runs/<name>.jsonl, and the manifest ../runs/manifest.json.

Every run is labelled from how it was made, never from a detector:

  healthy      a sane optimizer and learning rate (SGD with momentum at
               0.01-0.1, Adam/AdamW at 1e-3-1e-2), with or without warm-up,
               gradient clipping, warm restarts (SGDR), 20-30% label noise,
               or a data loader that stalls now and then.
  divergence   learning rate 5-50 from the start (SGD, Adam or AdamW on ReLU
               networks, no clipping):
               the loss explodes at once; on a ReLU network it may then
               settle back at or above where it started, the network dead,
               validation accuracy at chance. Or a scheduler that multiplies
               the learning rate by 3 every point from onset on.
               onset: the first point the fault acts on.
  no_progress  learning rate 1e-7-1e-6, every hidden unit dead from
               initialisation (biases at -20), or every training label
               replaced by a random one: the model never learns. onset:
               point 5 (index 4), by which every healthy recipe here has its
               loss below its first value (TestRunsHealthyLossesAreDownByPoint5
               holds the corpus to that).
  nan          from onset, one input of one batch is NaN or +Inf: the loss
               turns non-finite and the weights with it.
  loss_spike   the batches of 1-3 points from onset are corrupt (inputs x20,
               labels shuffled), as a bad shard gives.

Beside its label, a run lists the kinds that are as right as the label
("accept": a learning rate far too high from the start may kill the network,
which then sits at its starting loss, no progress as much as divergence; a
growing learning rate explodes the gradients first) and the kinds that may
truly fire as a side effect and count neither way ("tolerate": the NaN a
divergence overflows into, the gradients of a corrupt batch).

The split into tuning and test halves is fixed once: within each label, runs
are ordered by sha256("niuma-sentinel-corpus/" + name) and alternate between
the halves, tuning first; the manifest keeps it, and a run added later goes
to the half its hash's first byte's parity names (even: tuning).

Run: nice /usr/bin/python3 sentinel/testdata/gen/record_runs.py [NAME...]
(Debian's python3-torch and python3-sklearn; under a minute on 2 cores).
With names, only those runs are recorded again; --manifest writes the
manifest alone.
"""
import hashlib
import json
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from sklearn import datasets  # noqa: E402

torch.set_num_threads(1)
here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.join(here, "..", "runs")


def load(name, seed):
    if name == "digits":
        X, y = datasets.load_digits(return_X_y=True)
    elif name == "iris":
        X, y = datasets.load_iris(return_X_y=True)
    elif name == "wine":
        X, y = datasets.load_wine(return_X_y=True)
    elif name == "cancer":
        X, y = datasets.load_breast_cancer(return_X_y=True)
    elif name == "moons":
        X, y = datasets.make_moons(n_samples=800, noise=0.25, random_state=seed)
    elif name == "regression":
        X, y = datasets.make_regression(n_samples=800, n_features=10, noise=10.0, random_state=seed)
        y = (y - y.mean()) / y.std()
    else:
        raise ValueError(name)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    X, y = X[idx], y[idx]
    X = (X - X.mean(0)) / (X.std(0) + 1e-6)
    n = int(0.75 * len(X))
    X = torch.tensor(X, dtype=torch.float32)
    if name == "regression":
        y = torch.tensor(y, dtype=torch.float32).unsqueeze(1)
    else:
        y = torch.tensor(y, dtype=torch.long)
    return X[:n], y[:n], X[n:], y[n:]


def build(model, d, c, dataset):
    if model == "logreg":
        return nn.Linear(d, c)
    if model == "mlp":
        return nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, c))
    if model == "mlp2":
        return nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, c))
    if model == "cnn":
        assert dataset == "digits"
        return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 16, c))
    raise ValueError(model)


def record(r):
    seed = r["seed"]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed + 1)
    Xtr, ytr, Xva, yva = load(r["data"], seed)
    regression = r["data"] == "regression"
    c = 1 if regression else int(ytr.max()) + 1
    noise = r.get("label_noise", 0.0)
    if noise > 0:
        ytr = ytr.clone()
        flip = torch.tensor(rng.random(len(ytr)) < noise)
        ytr[flip] = torch.tensor(rng.integers(0, c, int(flip.sum())))
    model = build(r["model"], Xtr.shape[1], c, r["data"])
    if r.get("dead"):
        with torch.no_grad():
            for m in model:
                if isinstance(m, nn.Linear) and m is not list(model)[-1]:
                    m.bias.fill_(-20.0)
    lr = r["lr"]
    opt = {"sgd": lambda p: torch.optim.SGD(p, lr=lr, momentum=0.9),
           "adam": lambda p: torch.optim.Adam(p, lr=lr),
           "adamw": lambda p: torch.optim.AdamW(p, lr=lr, weight_decay=0.01)}[r["opt"]](model.parameters())
    loss_fn = nn.MSELoss() if regression else nn.CrossEntropyLoss()
    points, bpp, bs = r["points"], r["bpp"], 32
    warm = r.get("warmup", 0)  # points of linear warm-up
    restart = r.get("restarts", 0)  # points per cosine cycle
    fault, onset, width = r.get("fault", ""), r.get("onset", -1), r.get("width", 1)
    order = rng.permutation(len(Xtr))
    pos = 0
    lines = []
    for pt in range(points):
        # The learning rate of this point.
        f = 1.0
        if warm and pt < warm:
            f = (pt + 1) / warm
        if restart:
            f *= 0.5 * (1 + math.cos(math.pi * (pt % restart) / restart))
            f = max(f, 0.02)
        if fault == "ramp" and pt >= onset:
            f *= 3.0 ** (pt - onset + 1)
        for g in opt.param_groups:
            g["lr"] = lr * f
        if fault == "stall" and pt % 10 == 9:
            time.sleep(0.2)  # the loader waits for its workers
        losses, norms = [], []
        model.train()
        for b in range(bpp):
            if pos + bs > len(order):
                order, pos = rng.permutation(len(Xtr)), 0
            idx = order[pos:pos + bs]
            pos += bs
            xb, yb = Xtr[idx].clone(), ytr[idx].clone()
            if fault == "spike" and onset <= pt < onset + width:
                xb = xb * 20
                yb = yb[torch.randperm(len(yb))]
            if fault == "nan" and pt == onset and b == 0:
                xb[0, 0] = float(r.get("bad", "nan"))
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), r["clip"] if r.get("clip") else float("inf"))
            opt.step()
            losses.append(loss.item())
            norms.append(float(norm))
        model.eval()
        with torch.no_grad():
            out = model(Xva)
            vl = loss_fn(out, yva).item()
            line = {"step": pt + 1, "loss": float(np.mean(losses)), "val_loss": vl}
            if not regression:
                line["val_acc"] = (out.argmax(1) == yva).float().mean().item()
            line["grad_norm"] = float(np.mean(norms))
            line["lr"] = lr * f
        lines.append(json.dumps(line))
        if fault == "nan" and pt >= onset + 3:
            break  # what a training script does once its loss is NaN
    return lines


def recipes():
    rs = []

    def add(name, label, **kw):
        kw.setdefault("seed", len(rs) + 1)
        kw.setdefault("points", 80)
        kw.setdefault("bpp", 5)
        rs.append(dict(name=name, label=label, **kw))

    # Healthy: datasets x models x optimizers, and the options a healthy run has.
    sane = [("digits", "mlp", "adam", 1e-3), ("digits", "cnn", "adam", 3e-3), ("digits", "logreg", "sgd", 0.05),
            ("iris", "mlp", "adamw", 1e-2), ("wine", "mlp", "sgd", 0.01), ("cancer", "logreg", "adam", 3e-3),
            ("moons", "mlp", "adam", 1e-2), ("regression", "mlp", "sgd", 0.01), ("digits", "mlp2", "sgd", 0.05),
            ("wine", "logreg", "adamw", 3e-3), ("cancer", "mlp2", "adamw", 1e-3), ("moons", "mlp2", "sgd", 0.1)]
    opts = [{}, {"warmup": 10}, {"clip": 1.0}, {"restarts": 25}, {"label_noise": 0.25}, {"fault": "stall"}]
    for i, (data, model, opt, lr) in enumerate(sane):
        o = dict(opts[i % len(opts)])
        if data == "regression" and "label_noise" in o:
            o = {"clip": 1.0}
        tag = "-".join(str(v) if k == "fault" else k for k, v in o.items()) or "plain"
        add(f"healthy-{data}-{model}-{opt}-{tag}", "healthy", data=data, model=model, opt=opt, lr=lr,
            points=[60, 120, 80, 150][i % 4], **o)
        o2 = dict(opts[(i + 3) % len(opts)])
        if data == "regression" and "label_noise" in o2:
            o2 = {"warmup": 10}
        if i == 8:
            o2["label_noise"] = 0.3
        tag2 = "-".join(str(v) if k == "fault" else k for k, v in o2.items()) or "plain"
        add(f"healthy-{data}-{model}-{opt}-{tag2}-b", "healthy", data=data, model=model, opt=opt, lr=lr * 2,
            points=[100, 60, 150, 80][i % 4], bpp=[3, 10, 5, 8][i % 4], **o2)

    # Divergence: a learning rate far too high from the start.
    big = [("digits", "mlp", "sgd", 20), ("digits", "mlp", "adam", 5), ("digits", "cnn", "sgd", 50),
           ("iris", "mlp", "sgd", 30), ("wine", "mlp2", "adam", 10), ("cancer", "mlp", "sgd", 50),
           ("moons", "mlp", "sgd", 50), ("digits", "cnn", "adam", 20), ("wine", "mlp", "sgd", 10),
           ("digits", "mlp2", "adamw", 8)]
    for i, (data, model, opt, lr) in enumerate(big):
        add(f"divergence-lr{lr:g}-{data}-{model}-{opt}", "divergence", data=data, model=model, opt=opt, lr=lr,
            onset=0, points=[40, 60, 80][i % 3], bpp=1 if i % 2 == 0 else 5, accept=["no_progress"],
            tolerate=["loss_spike", "grad_explosion", "nan", "plateau"])
    # Divergence: the learning rate grows by half every point from onset.
    ramp = [("digits", "mlp", "adam", 1e-3), ("iris", "mlp", "sgd", 0.01), ("wine", "logreg", "adamw", 3e-3),
            ("cancer", "mlp", "sgd", 0.01), ("moons", "mlp2", "adam", 3e-3), ("regression", "mlp", "sgd", 0.01),
            ("digits", "cnn", "sgd", 0.02), ("digits", "mlp2", "adamw", 1e-3)]
    for i, (data, model, opt, lr) in enumerate(ramp):
        add(f"divergence-ramp-{data}-{model}-{opt}", "divergence", data=data, model=model, opt=opt, lr=lr,
            fault="ramp", onset=30 + 7 * i, points=100, accept=["grad_explosion"],
            tolerate=["loss_spike", "nan", "no_progress"])

    # No progress.
    tiny = [("digits", "mlp", "sgd", 1e-7), ("iris", "logreg", "adam", 1e-7), ("wine", "mlp2", "adamw", 1e-6),
            ("cancer", "mlp", "sgd", 1e-6), ("moons", "logreg", "sgd", 1e-7), ("regression", "mlp", "adam", 1e-7)]
    for i, (data, model, opt, lr) in enumerate(tiny):
        add(f"noprogress-lr{lr:g}-{data}-{model}-{opt}", "no_progress", data=data, model=model, opt=opt, lr=lr,
            onset=4, points=[50, 80, 100][i % 3], tolerate=["plateau"])
    dead = [("digits", "mlp", "adam", 1e-3), ("wine", "mlp", "sgd", 0.05), ("cancer", "mlp2", "adamw", 1e-3)]
    for i, (data, model, opt, lr) in enumerate(dead):
        add(f"noprogress-dead-{data}-{model}-{opt}", "no_progress", data=data, model=model, opt=opt, lr=lr,
            dead=True, onset=4, points=60, tolerate=["plateau"])
    shuffled = [("digits", "mlp", "adam", 1e-3), ("iris", "mlp", "sgd", 0.05), ("wine", "logreg", "adam", 1e-2),
                ("cancer", "mlp", "adamw", 3e-3)]
    for i, (data, model, opt, lr) in enumerate(shuffled):
        add(f"noprogress-randomlabels-{data}-{model}-{opt}", "no_progress", data=data, model=model, opt=opt, lr=lr,
            label_noise=1.0, onset=4, points=80, tolerate=["plateau"])

    # NaN / Inf injected into one batch.
    for i, (data, model, opt, lr) in enumerate(sane[:10]):
        add(f"nan-{data}-{model}-{opt}-{i}", "nan", data=data, model=model, opt=opt, lr=lr, fault="nan",
            bad=["nan", "inf"][i % 2], onset=20 + 6 * i, points=100)

    # Corrupt batches: a loss spike.
    for i, (data, model, opt, lr) in enumerate(sane[:11]):
        if data == "regression":
            continue
        add(f"spike-{data}-{model}-{opt}-{i}", "loss_spike", data=data, model=model, opt=opt, lr=lr, fault="spike",
            onset=30 + 5 * i, width=1 + i % 3, points=100,
            tolerate=["divergence", "grad_explosion", "no_progress"])

    # Added later (the runs above keep their seeds and halves).
    # The shape that once went unflagged: logged from the first batch on,
    # the loss blows up at its second point (10^6 x), then the dead network
    # settles at or above where it started, validation accuracy at chance.
    add("divergence-lr8-digits-mlp2-adamw-perbatch", "divergence", data="digits", model="mlp2", opt="adamw", lr=8,
        onset=0, points=40, bpp=1, seed=200, accept=["no_progress"], tolerate=["loss_spike", "grad_explosion", "nan", "plateau"])
    return rs


def split(rs):
    """The split is kept once made: runs the manifest already has keep
    their half; new ones go by the parity of their hash."""
    kept = {}
    path = os.path.join(out_dir, "manifest.json")
    if os.path.exists(path):
        with open(path) as f:
            kept = {m["name"]: m["split"] for m in json.load(f)}
    if kept:
        for r in rs:
            h = hashlib.sha256(("niuma-sentinel-corpus/" + r["name"]).encode()).digest()
            r["split"] = kept.get(r["name"], "tune" if h[0] % 2 == 0 else "test")
        return
    by = {}
    for r in rs:
        by.setdefault(r["label"], []).append(r)
    for group in by.values():
        group.sort(key=lambda r: hashlib.sha256(("niuma-sentinel-corpus/" + r["name"]).encode()).hexdigest())
        for i, r in enumerate(group):
            r["split"] = "tune" if i % 2 == 0 else "test"


def main():
    os.makedirs(out_dir, exist_ok=True)
    rs = recipes()
    split(rs)
    # Arguments: run names to record again (all when none), or --manifest
    # to write the manifest alone.
    only = set(sys.argv[1:])
    for r in rs:
        if only and r["name"] not in only or "--manifest" in only:
            continue
        t0 = time.monotonic()
        lines = record(r)
        with open(os.path.join(out_dir, r["name"] + ".jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{r['name']}: {len(lines)} points, {time.monotonic() - t0:.1f}s", file=sys.stderr)
    manifest = []
    for r in rs:
        m = {"name": r["name"], "label": r["label"], "split": r["split"],
             "onset": r.get("onset", -1) if r["label"] != "healthy" else -1,
             "accept": r.get("accept", []), "tolerate": r.get("tolerate", []),
             "recipe": {k: v for k, v in r.items() if k not in ("name", "label", "split", "onset", "accept", "tolerate")}}
        manifest.append(m)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
