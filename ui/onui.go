package ui

import (
	"sync"

	"fyne.io/fyne/v2"
)

// onUI runs f on Fyne's thread (fyne.Do), and onUIWait waits until it has
// run (fyne.DoAndWait): they are how a view's goroutine reaches its
// widgets, and the only way.
func onUI(f func()) { fyne.Do(func() { takeTurn(f) }) }

// onUIWait is onUI that returns once f has run.
func onUIWait(f func()) { fyne.DoAndWait(func() { takeTurn(f) }) }

// turn, when set, is held while f runs. The app leaves it nil: Fyne runs
// every f on its one thread, after the event being handled. Fyne's test
// driver runs f on the goroutine that calls fyne.Do instead, at once; the
// ui tests set turn and hold it while they tap or type as a user would,
// so that a goroutine's f never draws while a tap's handler does.
var turn sync.Locker

func takeTurn(f func()) {
	if turn != nil {
		turn.Lock()
		defer turn.Unlock()
	}
	f()
}
