package docker

import (
	"io"

	"niuma/engine/executor/logcap"
)

// capLog caps what the handle copies into an attempt's log file: the first
// LogCap bytes of the stream are kept (kept of them already in the file,
// for a container read on after a restart), the rest counted and dropped.
func (x *Executor) capLog(w io.Writer, stream string, kept int64) *logcap.Writer {
	return &logcap.Writer{W: w, Cap: x.LogCap, Stream: stream, Kept: kept}
}

// endLogs writes the count of what was dropped at the end of a cut log,
// once the container's output has ended; not when the handle is released
// (the container runs on and the next owner reads on).
func (h *handle) endLogs(so, se *skipWriter) {
	if h.ctx.Err() != nil {
		return
	}
	for _, s := range []*skipWriter{so, se} {
		if c, ok := s.w.(*logcap.Writer); ok {
			_ = c.Close()
		}
	}
}
