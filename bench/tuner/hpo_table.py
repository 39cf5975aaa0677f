#!/usr/bin/env python3
"""Prints the Optuna / Niuma comparison that bench/tuner/hpo.sh collected, as Markdown: per table
and noise setting, the median regret at budgets 50 and 100 of Niuma's Bayesian search, Optuna's
TPE, Niuma's and Optuna's random search, the ratio Niuma / TPE, and a summary of the targets.

usage: hpo_table.py RESULTS_DIR
"""
import glob, json, os, sys

def load(d):
    res = {}
    for p in glob.glob(os.path.join(d, "*.json")):
        name, tuner = os.path.basename(p).split(".")[:2]
        noisy = ".noisy." in os.path.basename(p)
        with open(p) as f:
            res[(name, tuner, noisy)] = {int(k): v for k, v in json.load(f)["median_regret"].items()}
    return res

def le(a, b):
    """a <= b, counting values equal to nine digits as equal (Python and Go sum the seeds' values
    in different orders, so the same configuration's mean can differ in the last bits)."""
    return a <= b * (1 + 1e-9) + 1e-15

def fmt(x):
    return "0" if x == 0 else "%.3g" % x

def main(d):
    res = load(d)
    tables = sorted({k[0] for k in res})
    for noisy in (False, True):
        rows = [(t, {tu: res.get((t, tu, noisy)) for tu in ("niuma-bayes", "optuna-tpe", "niuma-random", "optuna-random")}) for t in tables]
        rows = [r for r in rows if r[1]["niuma-bayes"] and r[1]["optuna-tpe"] and r[1]["niuma-random"]]
        if not rows:
            continue
        print("\n%s (median regret over repetitions; lower is better)\n" % ("Noisy: one seed's value per trial" if noisy else "Mean over seeds per trial"))
        print("| table | Niuma @50 | TPE @50 | ratio | Niuma @100 | TPE @100 | ratio | random @50 (Niuma / Optuna) | random @100 (Niuma / Optuna) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        wins = {50: 0, 100: 0}
        worst = {50: 0.0, 100: 0.0}
        beats_random = {50: 0, 100: 0}
        for t, r in rows:
            cells = [t]
            for b in (50, 100):
                n, tpe = r["niuma-bayes"][b], r["optuna-tpe"][b]
                ratio = n / tpe if tpe > 0 else (1.0 if n == 0 else float("inf"))
                wins[b] += le(n, tpe)
                worst[b] = max(worst[b], ratio)
                rnd = [x[b] for x in (r["niuma-random"], r["optuna-random"]) if x]
                beats_random[b] += (n < min(rnd) and not le(min(rnd), n)) or n == 0
                cells += [("**%s**" if le(n, tpe) else "%s") % fmt(n), fmt(tpe), "%.2f" % ratio]
            for b in (50, 100):
                cells.append("%s / %s" % (fmt(r["niuma-random"][b]), fmt(r["optuna-random"][b]) if r["optuna-random"] else "—"))
            print("| " + " | ".join(cells) + " |")
        n = len(rows)
        print("\nNiuma ≤ TPE on %d/%d tables at 50 trials and %d/%d at 100; worst ratio %.2f at 50, %.2f at 100; "
              "better than random search (Niuma's and Optuna's) on %d/%d at 50 and %d/%d at 100." %
              (wins[50], n, wins[100], n, worst[50], worst[100], beats_random[50], n, beats_random[100], n))

if __name__ == "__main__":
    main(sys.argv[1])
