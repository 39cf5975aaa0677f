// Package textrule reads metric values out of the plain text lines a
// workload prints: the lenient preprocessing every line gets (progress
// segments split at '\r', terminal escape codes and common log prefixes
// removed) and the text rules a template may declare on a stage: built-in
// presets for formats scripts and training libraries already print
// (key=value pairs, PyTorch examples' "| key value |" tables, Keras
// progress lines, tqdm postfixes, Python dict reprs, Hugging Face Trainer's
// dicts, XGBoost/LightGBM/CatBoost eval lines, Caffe's solver log,
// scikit-learn's verbose output, skorch's table, fairseq's progress) and
// regular expressions with named groups. Detect orders the presets tried
// on a stage that names none, with the evidence each needs.
//
// It is pure: bytes in, records out; no I/O. The template package uses it
// to check a stage's `metrics:` section, the metrics package to apply it.
package textrule
