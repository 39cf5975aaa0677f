#!/usr/bin/env python3
"""Optuna's TPE under optuna_reference.py's protocol (its load and snap, its loop), for sampler
seeds FIRST..FIRST+REPS-1 instead of 0..REPS-1: the held-out comparison in docs/BENCHMARKS.md,
on seeds no choice of Niuma's was made on.

usage: optuna_seeds.py TABLE.csv.gz FIRST REPS BUDGET   (run with /usr/bin/python3; the
reference script optuna_reference.py is imported from the table's folder)
"""
import os
import sys, json, statistics
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
import optuna_reference as ref
import optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
path, first, reps, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
names, space, table, goal = ref.load(path)
means = {k: statistics.fmean(v) for k, v in table.items()}
best = (min if goal == "min" else max)(means.values())
curves = []
for rep in range(first, first + reps):
    smp = optuna.samplers.TPESampler(seed=rep)
    study = optuna.create_study(direction="minimize" if goal == "min" else "maximize", sampler=smp)
    inc_obs, inc_key, curve = None, None, []
    for t in range(budget):
        trial = study.ask(); key = []
        for n in names:
            s = space[n]
            if s["kind"] == "choice": x = trial.suggest_categorical(n, s["values"])
            elif s["kind"] == "int": x = trial.suggest_int(n, int(s["values"][0]), int(s["values"][-1]), log=s["log"])
            else: x = trial.suggest_float(n, s["values"][0], s["values"][-1], log=s["log"])
            key.append(ref.snap(s, x))
        key = tuple(key); y = means[key]; study.tell(trial, y)
        if inc_obs is None or (y < inc_obs if goal == "min" else y > inc_obs): inc_obs, inc_key = y, key
        curve.append(abs(best - means[inc_key]))
    curves.append(curve)
print(json.dumps({"table": path, "sampler": "tpe", "first": first, "median_regret": {t + 1: statistics.median(c[t] for c in curves) for t in range(budget)}}))
