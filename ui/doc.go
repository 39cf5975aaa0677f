// Package ui holds Niuma's Fyne views: the main window's navigation
// ([Shell]: Board, Runs, Templates, Settings, and the launch [Wizard] on
// Ctrl+N), the live [Board] (a card per GPU and the queue of active runs
// with the shepherd's reasons), the runs list with its run detail (stages,
// a live metric curve drawn by niuma/plot with a log-y toggle, the GPUs
// each stage last ran on, a searchable tail of a stage's log, anomalies
// with their fix and, for a run's own anomalies, "Retry with the fix"), and
// the "Export report…" dialog. The app's look is [NewTheme]: Fyne's default
// theme (light or dark, following the system) with Niuma's accent.
//
// ui depends on the engine's public API and read models only — through the
// [Backend] interface, which *engine.Engine satisfies — and on gpumon's
// snapshot types, and on sentinel's anomaly kinds and parameter changes;
// never on storage or on an executor. It must build and
// test with CGO_ENABLED=0, so it never imports fyne.io/fyne/v2/app.
// Templates reach the wizard through [Options.Templates], which the app
// fills; reports are rendered by a [ReportExporter] the app hands in.
// Updates from background goroutines reach widgets only through fyne.Do.
package ui
