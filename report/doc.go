// Package report turns a report model — one run, or a comparison of two to
// a hundred runs — into a document: HTML (one self-contained file), PDF
// (A4 or Letter), Markdown with PNG figures beside it, and CSV or JSON of
// the raw metric points and parameters.
//
// The package is pure: a [Report] in, bytes out. It imports no database,
// no engine and no os; the caller (the CLI, the window) reads the archive,
// fills the model and decides where the bytes go. Charts come from
// niuma/plot so that they look like the window's.
//
// Every format is built from the same outline (see outline.go): a run
// report has the run's facts, parameters, provenance, stage table, curves,
// final and best values, anomalies, GPU usage and the log tails of failed
// stages; a comparison has a ranking by the objective, the parameters that
// differ, overlaid curves of the best runs and the objective against each
// numeric parameter.
//
// Text from runs (names, parameters, log lines) is untrusted: HTML escapes
// it (html/template), Markdown escapes its markup characters, and the PDF
// draws it as text in embedded Unicode fonts — Liberation, plus a caller's
// fallback font for Chinese (Options.FallbackFont); characters no font has
// become "?" rather than an error.
//
// Limits keep a document readable and fast whatever its input: at most 8
// charts in a run report, and in a comparison 4 overlaid metrics of the 8
// best runs plus 6 parameter-vs-objective scatters; every curve is reduced
// with LTTB before drawing (the CSV and JSON keep every point).
package report
