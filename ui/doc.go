// Package ui holds Niuma's Fyne views: the runs list with its run detail,
// and the "Export report…" dialog (format, page size, what to include, a
// save dialog and a progress dialog); later the board, the launch wizard
// and the archive.
//
// ui depends on the engine's public API and read models only — never on
// storage or on an executor — and it must build and test with
// CGO_ENABLED=0, so it never imports fyne.io/fyne/v2/app. Reports are
// rendered by a [ReportExporter] the app hands in (it reads the archive;
// niuma/report turns the model into bytes). Updates from background
// goroutines reach widgets only through fyne.Do.
package ui
