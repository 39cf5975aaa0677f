// Package ui holds Niuma's Fyne views: the main window's navigation
// ([Shell]: Board, Runs, Archive, Templates, Settings, the launch [Wizard]
// on Ctrl+N, and notifications shown in the window — a toast and the
// bell's list — and on the desktop when its notification service answers;
// a Cluster page of Slurm's nodes and jobs when the app hands in a reader;
// Settings, which serves Prometheus metrics through [MetricsServer]).
//
//   - The [Board] is nvitop's view with the runs: a card per GPU with its
//     utilisation and memory now and over the last 5, 15 or 60 minutes
//     (the sampler's history), the processes on the GPUs with their user,
//     command, memory and run, the active runs with their progress and
//     why they wait, and the runs that finished lately.
//   - The Runs page ([MainView]) groups a sweep's runs under a header and
//     shows the selected run: a header with its parameters and the error
//     line of a failed stage, an interactive chart (chart.go) of every
//     attempt of a metric — hover values, drag to zoom, smoothing, step,
//     relative or wall time, log y — and tabs for the stages (a DAG
//     picture), the anomalies (with "Retry with the fix"), the log and the
//     metrics; "Export report…" writes a report.
//   - The [ArchiveView] is every run, with a column per parameter, sweeps
//     grouped, compare, delete, and the hyperparameter view (objective
//     against each parameter, parallel coordinates; a click opens a run).
//
// Every dialog answers Enter and Escape (keys.go). The app's look is
// [NewTheme]: Fyne's default theme (light or dark, following the system)
// with Niuma's accent.
//
// ui depends on the engine's public API and read models only — through the
// [Backend] interface, which *engine.Engine satisfies — and on gpumon's
// snapshot types, sentinel's anomaly kinds and parameter changes, and
// shepherd's FirstFit (whether this machine could ever hold a run),
// Schedule over Build's requests (where each run of the wizard would go
// now, resources.go) and predict's estimates (the board's ETA); never on
// storage or on an executor. What the engine does not offer yet is asked
// for through small interfaces a Backend may also satisfy: a run's own
// resources (resourceBackend), what a run was launched with
// (launchRecords), its ETA (etaBackend), the studies (studyBackend) and
// launching one from the wizard's Search mode (studyLauncher);
// without them the window shows what it can and says what it cannot. It must build and test with
// CGO_ENABLED=0, so it never imports fyne.io/fyne/v2/app. Templates, the
// sampler's history and process look-ups reach it through [Options], which
// the app fills; reports are rendered by a [ReportExporter] the app hands
// in. Updates from background goroutines reach widgets only through
// onUI and onUIWait (fyne.Do, onui.go), and every such goroutine is one of
// its view's tasks (tasks.go): a view's Close (the Shell's, for the
// window) ends them, so none draws into a window or app that came after
// its own. The tests act as the user holding the ui's turn and wait for
// what each action started, so that no fill draws while they do.
package ui
