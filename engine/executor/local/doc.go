// Package local runs stage attempts as host processes, each in its own
// process group, with stdout and stderr written straight to log files in the
// stage directory so that a process outlives a crash of Niuma and can be
// adopted again after a restart.
package local
