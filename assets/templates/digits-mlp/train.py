"""Stage train: a one-hidden-layer MLP on the standardised digits.

Prints one metrics line per epoch (step = epoch, 1-based):
  {"step": 3, "loss": ..., "val_loss": ..., "val_acc": ..., "grad_norm": ..., "lr": ...,
   "total_steps": 30}
(total_steps is the number of epochs: Niuma's board shows the progress from it).

Device: CUDA when the stage was given a GPU (CUDA_VISIBLE_DEVICES is not
empty) and the installed torch has CUDA; the CPU otherwise (a simulated GPU
has no CUDA device behind it).
where loss is the mean training loss of the epoch and grad_norm the total L2
norm of the gradients before each optimizer step, averaged over the epoch.

Outputs under train/: model.pt (final weights), history.json (every epoch).
A checkpoint (train/checkpoint.pt) is written at the end of every epoch and on
SIGTERM (then exit 143); a later attempt with the same parameters and seed
resumes from it exactly. It is removed once training succeeds.

NaN: if the training loss becomes NaN or infinite, the epoch's metrics line is
still printed with the non-finite values as NaN, history.json records
"status": "diverged", no model.pt is written, a message on stderr says what
happened and what to try, and the stage exits with code 2.
For demos of anomaly detection, NIUMA_DEMO_INJECT_NAN=<epoch> poisons the loss
at that epoch on purpose.
"""

import json
import math
import os
import random
import sys
import time

import niuma_stage as ns

stop = ns.StopFlag()

# OpenMP threads that spin while waiting make tiny models crawl when the cores are
# shared (20-100x slower on a busy 2-core box); sleep instead. Must be set before
# torch loads libgomp; an explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Deterministic cuBLAS (with torch.use_deterministic_algorithms) needs this
# before CUDA starts; harmless on the CPU.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def set_threads():
    try:
        n = int(os.environ.get("OMP_NUM_THREADS") or 2)
    except ValueError:
        n = 2
    n = max(1, n)
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set in this process
    return n


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed % (2**63))  # NIUMA_SEED may be any int64, even negative
    try:
        torch.use_deterministic_algorithms(True)
    except Exception:  # older builds: best effort only
        pass


def pick_device():
    """CUDA when Niuma gave the stage a GPU and torch can use it."""
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return torch.device("cpu"), "cpu"
    try:
        if torch.cuda.is_available():
            return torch.device("cuda"), "cuda (%s)" % torch.cuda.get_device_name(0)
    except Exception as e:  # a broken driver: train on the CPU rather than fail
        ns.warn("train: CUDA is not usable (%s); training on the CPU" % e)
        return torch.device("cpu"), "cpu"
    return torch.device("cpu"), "cpu (torch has no CUDA for GPU %s)" % os.environ["CUDA_VISIBLE_DEVICES"]


def build_model(n_in, hidden, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch without weights_only
        return torch.load(path, map_location="cpu")


def save(obj, path):
    tmp = ns.atomic_path(path)
    torch.save(obj, tmp)
    os.replace(tmp, path)


def grad_norm(model):
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += float(p.grad.detach().pow(2).sum())
    return math.sqrt(total) if math.isfinite(total) else float("nan")


def main():
    t0 = time.time()
    threads = set_threads()
    p = ns.params()
    seed = ns.seed()
    seed_everything(seed)
    out = ns.stage_dir(ns.stage_name("train"))
    data_path = os.path.join(ns.run_dir(), "preprocess", "data.npz")
    if not os.path.exists(data_path):
        ns.fail("%s not found: run the preprocess stage first" % data_path)
    d = np.load(data_path)
    device, device_name = pick_device()
    X_train = torch.from_numpy(d["X_train"]).to(device)
    y_train = torch.from_numpy(d["y_train"]).to(device)
    X_val = torch.from_numpy(d["X_val"]).to(device)
    y_val = torch.from_numpy(d["y_val"]).to(device)
    n_in = X_train.shape[1]
    n_out = int(max(int(y_train.max()), int(y_val.max())) + 1)

    model = build_model(n_in, p["hidden"], n_out).to(device)
    if p["optimizer"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=p["lr"])
    else:
        opt = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(seed % (2**63))
    try:
        inject_nan = int(os.environ.get("NIUMA_DEMO_INJECT_NAN", "0"))
    except ValueError:
        inject_nan = 0

    fingerprint = {k: p[k] for k in ns.DEFAULTS}
    fingerprint["seed"] = seed
    ckpt_path = os.path.join(out, "checkpoint.pt")
    history = []
    epoch = 1  # the epoch in progress
    partial = None  # mid-epoch state when resuming from a SIGTERM checkpoint
    ck, state = None, {}
    if os.path.exists(ckpt_path):
        try:
            ck = load(ckpt_path)
            state = json.loads(ck["state"])
        except Exception as e:  # unreadable or from another version: start over
            ns.warn("train: ignoring unreadable checkpoint %s: %s" % (ckpt_path, e))
            ck = None
    if ck is not None:
        if state.get("fingerprint") == fingerprint:
            model.load_state_dict({k: v.to(device) for k, v in ck["model"].items()})
            opt.load_state_dict({"state": ck["optimizer"], "param_groups": state["optim_groups"]})
            gen.set_state(ck["generator"])
            history = list(state["history"])
            epoch = int(state["epoch"])
            partial = state.get("partial")
            if partial:
                partial["perm"] = ck["perm"]
            ns.log("train: resuming from checkpoint at epoch %d%s (attempt %d)" % (
                epoch, " (mid-epoch)" if partial else "", ns.attempt()))
        else:
            ns.warn("train: ignoring checkpoint written with other parameters or seed")

    def checkpoint(partial_state, perm=None):
        # Plain numbers travel as a JSON string (torch 1.13's weights-only loader
        # rejects pickled floats); the file holds only tensors, ints and strings.
        opt_sd = opt.state_dict()
        state = {"fingerprint": fingerprint, "history": history, "epoch": epoch,
                 "partial": partial_state, "optim_groups": opt_sd["param_groups"]}
        obj = {
            "state": json.dumps(state),
            "model": model.state_dict(),
            "optimizer": opt_sd["state"],
            "generator": gen.get_state(),
        }
        if perm is not None:
            obj["perm"] = perm
        save(obj, ckpt_path)

    def evaluate():
        model.eval()
        with torch.no_grad():
            logits = model(X_val)
            vl = float(loss_fn(logits, y_val))
            va = float((logits.argmax(dim=1) == y_val).float().mean())
        model.train()
        return vl, va

    n = X_train.shape[0]
    bs = p["batch_size"]
    ns.log("train: MLP %d-%d-%d, %s lr=%g, batch %d, %d epochs, seed %d, %d thread(s), on %s" % (
        n_in, p["hidden"], n_out, p["optimizer"], p["lr"], bs, p["epochs"], seed, threads, device_name))
    model.train()
    diverged = False
    while epoch <= p["epochs"]:
        if partial:
            perm, start = partial["perm"], int(partial["start"])
            loss_sum, gn_sum, nb = float(partial["loss_sum"]), float(partial["gn_sum"]), int(partial["nb"])
            partial = None
        else:
            perm = torch.randperm(n, generator=gen)
            start, loss_sum, gn_sum, nb = 0, 0.0, 0.0, 0
        for s in range(start, n, bs):
            if stop.stop:
                checkpoint({"start": s, "loss_sum": loss_sum, "gn_sum": gn_sum, "nb": nb}, perm)
                ns.warn("train: SIGTERM at epoch %d, checkpoint saved to %s; exiting" % (epoch, ckpt_path))
                sys.exit(ns.EXIT_SIGTERM)
            idx = perm[s:s + bs].to(device)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(X_train[idx]), y_train[idx])
            if inject_nan and epoch == inject_nan:
                loss = loss * float("nan")
            loss.backward()
            gn = grad_norm(model)
            lv = float(loss)
            loss_sum += lv
            gn_sum += gn
            nb += 1
            if not (math.isfinite(lv) and math.isfinite(gn)):
                diverged = True
                break
            opt.step()
        train_loss = loss_sum / max(nb, 1)
        vl, va = evaluate()
        ns.emit(epoch, loss=train_loss, val_loss=vl, val_acc=va,
                grad_norm=gn_sum / max(nb, 1), lr=opt.param_groups[0]["lr"], total_steps=p["epochs"])
        history.append({"epoch": epoch, "loss": train_loss, "val_loss": vl, "val_acc": va,
                        "grad_norm": gn_sum / max(nb, 1)})
        if diverged:
            break
        epoch += 1
        checkpoint(None)

    hist_path = os.path.join(out, "history.json")
    if diverged:
        ns.write_json(hist_path, {"status": "diverged", "epochs": history, "params": fingerprint})
        hint = "Try a smaller learning rate (e.g. lr=%g)" % (p["lr"] / 10)
        if p["optimizer"] == "sgd":
            hint += " or optimizer=adam"
        ns.fail("training diverged: the loss became NaN/inf at epoch %d (%s, lr=%g). %s."
                % (epoch, p["optimizer"], p["lr"], hint), code=ns.EXIT_DIVERGED)

    save({"model": {k: v.cpu() for k, v in model.state_dict().items()}, "n_in": n_in, "hidden": p["hidden"], "n_out": n_out},
         os.path.join(out, "model.pt"))
    ns.write_json(hist_path, {"status": "ok", "epochs": history, "params": fingerprint})
    if os.path.exists(ckpt_path):
        os.unlink(ckpt_path)
    best = max(history, key=lambda h: h["val_acc"]) if history else None
    ns.log("train: done in %.1fs; final val_acc %.4f, best %.4f at epoch %d; model saved to %s" % (
        time.time() - t0, history[-1]["val_acc"], best["val_acc"], best["epoch"],
        os.path.join(out, "model.pt")))


if __name__ == "__main__":
    main()
