"""Helpers shared by the digits-mlp stages: the Niuma stage contract in one place.

Contract (see ARCHITECTURE.md, "The stage contract"):
  * cwd is the run directory; NIUMA_RUN_DIR holds its absolute path.
  * NIUMA_STAGE, NIUMA_RUN_ID, NIUMA_ATTEMPT, NIUMA_SEED describe the attempt.
  * params.json in the run directory holds every parameter value; each one is
    also in the environment as NIUMA_PARAM_<UPPERCASE NAME>.
  * A stage writes under <run dir>/<stage>/ and may read earlier stages' output.
  * Metrics: one JSON object per line on stdout with a numeric "step", flushed.
    Everything else (these log lines, stderr) is plain log.
  * Exit 0 = success; on SIGTERM exit promptly with 143.
"""

import json
import math
import os
import signal
import sys
import tempfile

# Defaults mirror template.yaml; used only when neither params.json nor the
# environment provides a value (e.g. running a script by hand).
DEFAULTS = {
    "lr": 0.01,
    "hidden": 64,
    "epochs": 30,
    "optimizer": "adam",
    "batch_size": 64,
}
TYPES = {"lr": float, "hidden": int, "epochs": int, "optimizer": str, "batch_size": int}

EXIT_SIGTERM = 143
EXIT_DIVERGED = 2


def run_dir():
    return os.path.abspath(os.environ.get("NIUMA_RUN_DIR") or os.getcwd())


def stage_name(default):
    return os.environ.get("NIUMA_STAGE") or default


def stage_dir(stage):
    """<run dir>/<stage>/, created if missing."""
    d = os.path.join(run_dir(), stage)
    os.makedirs(d, exist_ok=True)
    return d


def seed():
    raw = os.environ.get("NIUMA_SEED", "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        fail("NIUMA_SEED must be an integer, got %r" % raw)


def attempt():
    try:
        return int(os.environ.get("NIUMA_ATTEMPT", "1"))
    except ValueError:
        return 1


def params():
    """Parameter values: params.json first, then NIUMA_PARAM_* env, then defaults."""
    values = dict(DEFAULTS)
    path = os.path.join(run_dir(), "params.json")
    from_file = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            from_file = json.load(f)
        if not isinstance(from_file, dict):
            fail("params.json must hold a JSON object, got %s" % type(from_file).__name__)
    for name in DEFAULTS:
        if name in from_file:
            values[name] = from_file[name]
        else:
            env = os.environ.get("NIUMA_PARAM_" + name.upper())
            if env is not None:
                values[name] = env
    # Keep unknown parameters from params.json too (recorded in the summary).
    for name, v in from_file.items():
        values.setdefault(name, v)
    for name, typ in TYPES.items():
        try:
            v = values[name]
            if typ is int and isinstance(v, str):
                v = float(v)  # accept "64" and "64.0"
            values[name] = typ(v)
        except (TypeError, ValueError):
            fail("parameter %s: cannot read %r as %s" % (name, values[name], typ.__name__))
    if values["optimizer"] not in ("adam", "sgd"):
        fail("parameter optimizer must be adam or sgd, got %r" % values["optimizer"])
    for name in ("hidden", "epochs", "batch_size"):
        if values[name] < 1:
            fail("parameter %s must be at least 1, got %d" % (name, values[name]))
    if not values["lr"] > 0:
        fail("parameter lr must be positive, got %r" % values["lr"])
    return values


def _num(v):
    v = float(v)
    # json.dumps writes NaN as-is (the Niuma parser accepts it); infinities are
    # reported as NaN too so that every parser keeps the point.
    return v if math.isfinite(v) else float("nan")


def emit(step, **metrics):
    """One metrics line on stdout: {"step": N, name: value, ...}."""
    line = {"step": step}
    for k, v in metrics.items():
        line[k] = _num(v)
    print(json.dumps(line), flush=True)


def log(msg):
    print(msg, flush=True)


def warn(msg):
    print(msg, file=sys.stderr, flush=True)


def fail(msg, code=1):
    print("error: " + msg, file=sys.stderr, flush=True)
    sys.exit(code)


def write_json(path, obj):
    """Write JSON atomically (temp file + rename) so a stop never leaves half a file."""
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_path(path):
    """A temp path next to path; os.replace(tmp, path) once it is written."""
    d, base = os.path.split(path)
    return os.path.join(d, ".tmp-%d-%s" % (os.getpid(), base))


def read_json(path, what):
    if not os.path.exists(path):
        fail("%s not found at %s: did the earlier stage succeed?" % (what, path))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def exit_on_sigterm():
    """Stages with nothing to checkpoint: SIGTERM -> exit 143 right away."""

    def handler(signum, frame):
        warn("received SIGTERM, stopping")
        sys.exit(EXIT_SIGTERM)

    signal.signal(signal.SIGTERM, handler)


class StopFlag:
    """SIGTERM sets the flag; a training loop checks it and checkpoints."""

    def __init__(self):
        self.stop = False
        signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame):
        self.stop = True
