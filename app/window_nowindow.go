//go:build nowindow

package app

import (
	"fmt"
	"io"
)

// runWindow, in a build without the window (-tags nowindow: no Fyne, no
// OpenGL headers needed, as on a headless GPU server), says how to get it.
func runWindow(stderr io.Writer) int {
	fmt.Fprintln(stderr, "niuma: this build has no window (built with -tags nowindow); every other command works. "+
		"Build without the tag (make build) for the window.")
	return 2
}
