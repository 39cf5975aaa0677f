"""Stage analyze: gather params, seed, training history and test result into
analyze/summary.json and print a short human summary."""

import math
import os

import niuma_stage as ns

ns.exit_on_sigterm()


def main():
    rd = ns.run_dir()
    out = ns.stage_dir(ns.stage_name("analyze"))
    p = ns.params()
    seed = ns.seed()
    hist = ns.read_json(os.path.join(rd, "train", "history.json"), "training history")
    result = ns.read_json(os.path.join(rd, "validate", "result.json"), "validation result")
    meta_path = os.path.join(rd, "preprocess", "meta.json")
    meta = ns.read_json(meta_path, "preprocess summary") if os.path.exists(meta_path) else {}

    epochs = [h for h in hist.get("epochs", []) if isinstance(h.get("val_acc"), (int, float))
              and math.isfinite(h["val_acc"])]
    if not epochs:
        ns.fail("training history has no epoch with a finite val_acc")
    best = max(epochs, key=lambda h: h["val_acc"])  # earliest epoch wins ties
    final = epochs[-1]

    confusion = result["confusion"]
    per_class = {}
    for digit, row in enumerate(confusion):
        total = sum(row)
        per_class[str(digit)] = (row[digit] / total) if total else None
    worst = min((v, k) for k, v in per_class.items() if v is not None)

    summary = {
        "run_id": os.environ.get("NIUMA_RUN_ID", ""),
        "params": {k: p[k] for k in ns.DEFAULTS},
        "seed": seed,
        "best_val_acc": best["val_acc"],
        "best_epoch": best["epoch"],
        "final_val_acc": final["val_acc"],
        "final_loss": final["loss"],
        "epochs_run": len(hist.get("epochs", [])),
        "test_acc": result["test_acc"],
        "test_loss": result.get("test_loss"),
        "per_class_acc": per_class,
        "data": {k: meta[k] for k in ("n_train", "n_val", "n_test") if k in meta},
    }
    ns.write_json(os.path.join(out, "summary.json"), summary)

    lines = [
        "digits-mlp summary",
        "  params:   lr=%g hidden=%d epochs=%d optimizer=%s batch_size=%d seed=%d" % (
            p["lr"], p["hidden"], p["epochs"], p["optimizer"], p["batch_size"], seed),
        "  val_acc:  best %.4f at epoch %d, final %.4f" % (best["val_acc"], best["epoch"], final["val_acc"]),
        "  test_acc: %.4f on %d digits" % (result["test_acc"], result.get("n_test", 0)),
        "  per digit: " + " ".join("%s:%.2f" % (k, v) for k, v in per_class.items() if v is not None),
        "  hardest digit: %s (%.2f)" % (worst[1], worst[0]),
    ]
    ns.log("\n".join(lines))


if __name__ == "__main__":
    main()
