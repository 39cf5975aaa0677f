#!/usr/bin/env python3
"""Turns `niuma report --format csv` output of the digits-mlp grid into one line per run:
lr,hidden,optimizer,batch_size,seed,state,val_acc,val_loss where the last two are the train stage's
per-epoch values (first attempt), separated by spaces, to five significant digits.

usage: grid_csv.py CURVES.csv IDS.txt  (IDS: "run-id seed" per line)
"""
import csv, sys

def short(v):
    """Five significant digits: val_acc is a multiple of 1/270 (the validation set), so no
    information is lost there; val_loss keeps more digits than training noise justifies."""
    return "%.5g" % float(v)

def main(curves, ids):
    seeds = dict(l.split() for l in open(ids) if l.strip())
    runs = {}
    for r in csv.DictReader(open(curves)):
        if r["run"] == "run" or r["stage"] != "train" or r["attempt"] != "1":
            continue
        if r["metric"] not in ("val_acc", "val_loss"):
            continue
        k = r["run"]
        run = runs.setdefault(k, {"params": (r["lr"], r["hidden"], r["optimizer"], r["batch_size"]), "val_acc": {}, "val_loss": {}})
        run[r["metric"]][int(r["step"])] = r["value"]
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["lr", "hidden", "optimizer", "batch_size", "seed", "val_acc", "val_loss"])
    rows = []
    for k, run in runs.items():
        steps = sorted(run["val_acc"])
        lr, hidden, optimizer, batch_size = run["params"]
        rows.append(["%g" % float(lr), hidden, optimizer, batch_size, seeds.get(k, "")] +
                    [" ".join(short(run["val_acc"][s]) for s in steps),
                     " ".join(short(run["val_loss"].get(s, "nan")) for s in steps)])
    rows.sort(key=lambda r: (float(r[0]), int(r[1]), r[2], int(r[3]), int(r[4] or 0)))
    w.writerows(rows)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
