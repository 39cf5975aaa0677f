//go:build !linux

package slurm

// filesystemOf cannot tell a network filesystem here: list shared
// directories in the settings.
func filesystemOf(dir string) (name string, network bool) { return "unknown filesystem", false }
