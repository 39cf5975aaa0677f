// Package report will turn a report model (a run, or a comparison of runs)
// into HTML, PDF, Markdown and CSV. It is pure: model in, bytes out. No
// report formats exist yet.
package report
