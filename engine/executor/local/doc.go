// Package local runs stage attempts as host processes, each in its own
// process group, with stdout and stderr written to log files in the stage
// directory by a capper in the same group (package logcap: the first
// LogCap bytes of each stream are kept), never through Niuma, so that a
// process outlives a crash of Niuma and can be adopted again after a
// restart. The shim claims each attempt with a pid file (pid, token, start
// time) before it runs the command and records the exit status over a
// pre-allocated line, so a later owner finds the attempt by its token alone
// and never guesses how it ended.
package local
