package machine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The wire is one JSON object per line each way: a Request, then its
// Response, on a connection that may carry many in turn.

// Ops a Request may name.
const (
	OpPlace   = "place"
	OpClaim   = "claim"
	OpRelease = "release"
	OpStatus  = "status"
	OpCancel  = "cancel"
)

// Request is one call from a user's Niuma.
type Request struct {
	Op    string `json:"op"`
	Ask   *Ask   `json:"ask,omitempty"`
	Claim *Claim `json:"claim,omitempty"`
	Token string `json:"token,omitempty"` // release
	Run   string `json:"run,omitempty"`   // cancel
}

// Response is the service's answer to a Request. Error is set when it
// failed; Refused says the service said no (the caller may not, or the
// GPUs are taken), rather than that something broke.
type Response struct {
	Error   string        `json:"error,omitempty"`
	Refused bool          `json:"refused,omitempty"`
	Answer  *Answer       `json:"answer,omitempty"`
	Status  *Status       `json:"status,omitempty"`
	Cancel  *CancelResult `json:"cancel,omitempty"`
}

// MaxMessage is the longest line either side reads: a queue of thousands
// of stages fits; a peer that sends more is cut off.
const MaxMessage = 32 << 20

// ErrTooLong is ReadMessage's error for a line past MaxMessage.
var ErrTooLong = errors.New("message longer than 32 MiB")

// ReadMessage reads one line and decodes it into v.
func ReadMessage(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxMessage {
			return ErrTooLong
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), v); err != nil {
		return fmt.Errorf("malformed message: %w", err)
	}
	return nil
}

// WriteMessage writes v as one line.
func WriteMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
