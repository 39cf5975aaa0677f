package local

import "time"

// logGrace is how long an attempt's end waits for the last of its output
// to reach the log files when a process it left behind holds them open
// (the output goes through logcap's cappers).
const logGrace = 2 * time.Second
