package machine

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMessagesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	req := Request{Op: OpPlace, Ask: &Ask{Home: "/h", Queue: []Entry{{Token: "t", Run: "r", Stage: "s"}}}}
	require.NoError(t, WriteMessage(&buf, req))
	require.NoError(t, WriteMessage(&buf, Request{Op: OpStatus}))
	rd := bufio.NewReader(&buf)
	var got, second Request
	require.NoError(t, ReadMessage(rd, &got))
	require.NoError(t, ReadMessage(rd, &second))
	assert.Equal(t, req, got)
	assert.Equal(t, OpStatus, second.Op)
}

func TestAMessageTooLongIsRefused(t *testing.T) {
	long := strings.Repeat("x", MaxMessage+10)
	err := ReadMessage(bufio.NewReader(strings.NewReader(`{"op":"`+long+`"}`+"\n")), &Request{})
	assert.ErrorIs(t, err, ErrTooLong)
}

// FuzzReadMessage: whatever a user's process writes to the socket, the
// service's reader returns a request or an error, never panics.
func FuzzReadMessage(f *testing.F) {
	f.Add([]byte(`{"op":"place","ask":{"home":"/h","queue":[{"token":"t","request":{"ID":"r/s","GPUs":1}}]}}` + "\n"))
	f.Add([]byte(`{"op":"cancel","run":"abc"}` + "\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		err := ReadMessage(bufio.NewReader(bytes.NewReader(b)), &r)
		if err == nil && bytes.IndexByte(b, '\n') < 0 && len(bytes.TrimSpace(b)) == 0 {
			t.Fatal("an empty input read as a request")
		}
	})
}
