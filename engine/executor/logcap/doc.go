// Package logcap caps the log files of a stage attempt: the first Cap bytes
// a stream (stdout or stderr) writes are kept, the rest is counted and
// dropped, and a last line in the log says where it was cut and how many
// bytes were dropped, so that a stage printing garbage cannot fill the disk.
// Metrics are read from the kept part like any log.
//
// Two ways in, for the two kinds of writer:
//
//   - Writer, an io.Writer for a copy Niuma itself makes (the docker
//     executor copying a container's output into the files);
//   - Attach, for a host process that writes its output itself and must
//     outlive Niuma (the local executor): it puts a capper per stream (the
//     shell, head and wc) between the process and its files, in the
//     attempt's process group, so the cap holds while Niuma is away.
//
// The notice's words are made in one place (Notice) for both.
//
// logcap imports nothing of Niuma's.
package logcap
