"""Stage preprocess: load the 8x8 digits (bundled with scikit-learn, no download),
split train/val/test (70/15/15, stratified, seeded) and standardise with the
training statistics. Writes preprocess/data.npz and preprocess/meta.json."""

import os

import niuma_stage as ns

ns.exit_on_sigterm()

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402


def main():
    seed = ns.seed()
    out = ns.stage_dir(ns.stage_name("preprocess"))

    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float32)
    y = y.astype(np.int64)
    # numpy/sklearn accept seeds in [0, 2**32); any integer NIUMA_SEED maps there.
    rs = seed % (2**32)
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, test_size=0.30, stratify=y, random_state=rs
    )
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, test_size=0.50, stratify=y_rest, random_state=rs
    )

    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)
    std[std < 1e-6] = 1.0  # constant pixels (always blank borders) stay 0 after centring

    def scale(a):
        return ((a - mean) / std).astype(np.float32)

    path = os.path.join(out, "data.npz")
    tmp = ns.atomic_path(path)
    with open(tmp, "wb") as f:
        np.savez_compressed(
            f,
            X_train=scale(X_train), y_train=y_train,
            X_val=scale(X_val), y_val=y_val,
            X_test=scale(X_test), y_test=y_test,
            mean=mean, std=std,
        )
    os.replace(tmp, path)

    meta = {
        "dataset": "sklearn.datasets.load_digits",
        "seed": seed,
        "n_features": int(X.shape[1]),
        "n_classes": int(len(np.unique(y))),
        "n_train": int(len(y_train)),
        "n_val": int(len(y_val)),
        "n_test": int(len(y_test)),
        "split": "70/15/15 stratified",
        "standardise": "fit on train",
    }
    ns.write_json(os.path.join(out, "meta.json"), meta)
    ns.log(
        "preprocess: %d digits, %d features -> train %d / val %d / test %d (seed %d), standardised on train"
        % (len(y), X.shape[1], len(y_train), len(y_val), len(y_test), seed)
    )


if __name__ == "__main__":
    main()
