"""Stage validate: accuracy of train/model.pt on the held-out test split.

Prints {"step": 0, "test_acc": ..., "test_loss": ...} and writes
validate/result.json (test_acc, test_loss, confusion matrix: rows = true digit,
columns = predicted digit)."""

import os

import niuma_stage as ns

ns.exit_on_sigterm()

# OpenMP threads that spin while waiting make tiny models crawl when the cores are
# shared (20-100x slower on a busy 2-core box); sleep instead. Must be set before
# torch loads libgomp; an explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def main():
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS") or 2)))
    out = ns.stage_dir(ns.stage_name("validate"))
    rd = ns.run_dir()
    model_path = os.path.join(rd, "train", "model.pt")
    data_path = os.path.join(rd, "preprocess", "data.npz")
    for path, stage in ((model_path, "train"), (data_path, "preprocess")):
        if not os.path.exists(path):
            ns.fail("%s not found: did the %s stage succeed?" % (path, stage))
    try:
        saved = torch.load(model_path, map_location="cpu", weights_only=True)
    except TypeError:
        saved = torch.load(model_path, map_location="cpu")
    model = nn.Sequential(nn.Linear(saved["n_in"], saved["hidden"]), nn.ReLU(),
                          nn.Linear(saved["hidden"], saved["n_out"]))
    model.load_state_dict(saved["model"])
    model.eval()

    d = np.load(data_path)
    X = torch.from_numpy(d["X_test"])
    y = torch.from_numpy(d["y_test"])
    with torch.no_grad():
        logits = model(X)
        test_loss = float(nn.functional.cross_entropy(logits, y))
        pred = logits.argmax(dim=1)
    test_acc = float((pred == y).float().mean())
    k = saved["n_out"]
    confusion = [[0] * k for _ in range(k)]
    for t, p in zip(y.tolist(), pred.tolist()):
        confusion[t][p] += 1

    ns.emit(0, test_acc=test_acc, test_loss=test_loss)
    ns.write_json(os.path.join(out, "result.json"), {
        "test_acc": test_acc,
        "test_loss": test_loss,
        "n_test": int(len(y)),
        "confusion": confusion,
    })
    ns.log("validate: test accuracy %.4f on %d held-out digits (loss %.4f)" % (test_acc, len(y), test_loss))


if __name__ == "__main__":
    main()
