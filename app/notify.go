package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"niuma/engine"
)

// announceAll tells the user of every notify answer the engine gives while
// ctx lasts: a line on w (a headless engine's output or log) and a desktop
// notification where there is a desktop. The window shows its own.
func announceAll(ctx context.Context, eng *engine.Engine, w io.Writer) {
	sub := eng.Subscribe(256)
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.C:
			if !ok {
				return
			}
			if ev.Kind == engine.Notified {
				announce(w, ev)
			}
		}
	}
}

// announce prints one notification and hands it to the desktop's
// notification service through notify-send (libnotify-bin), when a session
// has one; a machine without it gets the line only.
func announce(w io.Writer, ev engine.Event) {
	fmt.Fprintf(w, "niuma: notify: %s\n", ev.Reason)
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	bin, err := exec.LookPath("notify-send")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, bin, "--app-name=Niuma", "Niuma: trouble in run "+ev.RunID, ev.Reason).Run()
}
