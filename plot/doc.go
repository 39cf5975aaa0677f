// Package plot will render metric curves with gonum/plot for both the window
// and reports. It imports no I/O packages. It draws nothing yet.
package plot
