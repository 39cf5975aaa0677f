// Package exporter serves Niuma's state to Prometheus: the machine's GPUs
// (utilisation, memory, temperature, power, health, throttling, and whether
// they are simulated), the queue (waiting stages and their longest wait, by
// the wait's reason code), runs by state, stage durations, anomalies and
// sentinel actions by kind, and the metric points the engine ingested.
//
// Names follow Prometheus' conventions: a niuma_ prefix, base units
// (_bytes, _seconds, _celsius, _watts, _ratio), _total on counters. Labels
// are bounded: GPUs by index and UUID, reasons and states from fixed code
// lists, stage durations by template and stage name (at most
// maxStageSeries pairs; further pairs count as "other"). Run IDs become
// labels only when Options.PerRun asks for it.
//
// Everything is read at scrape time through Source, which *engine.Engine
// implements; counters read storage from a cursor, so no anomaly or stage
// is counted twice or missed between scrapes. The package builds the
// handler and the server; it does not decide where they run (the app does:
// `niuma engine --metrics-addr`, $NIUMA_METRICS_ADDR for the window).
package exporter
