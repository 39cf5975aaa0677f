// Package ui holds Niuma's Fyne views: the runs list, and later the board,
// the launch wizard, the run view and the report dialog.
//
// ui depends on the engine's public API and read models only — never on
// storage or on an executor — and it must build and test with
// CGO_ENABLED=0, so it never imports fyne.io/fyne/v2/app. Updates from
// background goroutines reach widgets only through fyne.Do.
package ui
