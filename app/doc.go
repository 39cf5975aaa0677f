// Package app is Niuma's composition root: it reads the configuration, opens
// the data directory, wires storage, executors and the engine together, and
// exposes both faces of the program — the command-line interface and the
// desktop window.
//
// It is the only package that imports fyne.io/fyne/v2/app (cgo and OpenGL).
// No other package imports app.
package app
