package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"niuma/engine"
	"niuma/gpumon"
	"niuma/machine"
	"niuma/machine/service"
	"niuma/shepherd"
)

// Where the machine service keeps its settings and its state by default
// (make install-system puts them there).
const (
	defaultMachineConfig = "/etc/niuma/machine.yaml"
	defaultMachineDB     = "/var/lib/niuma/machine.db"
)

// serve is `niuma serve --system`: the machine service, which places every
// user's stages on this machine (see machine/service).
func (c *cli) serve(ctx context.Context, args []string) error {
	fs := c.flags("serve")
	system := fs.Bool("system", false, "serve the machine service, which shares this machine's GPUs, CPUs and memory among its users (run as root)")
	socket := fs.String("socket", machine.Socket(), "the Unix socket users' Niuma connect to")
	config := fs.String("config", defaultMachineConfig, "the service's settings: teams, shares, limits, admins (none: one queue for everyone)")
	db := fs.String("db", defaultMachineDB, "the service's own SQLite file (leases, queue entries, usage)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return exitError{code: 2, msg: fmt.Sprintf("serve takes no arguments, got %q", pos)}
	}
	if !*system {
		return exitError{code: 2, msg: "serve needs --system: `niuma serve --system` is the machine service that shares this machine among its users (make install-system installs it as a systemd unit)"}
	}
	cfg, err := service.LoadConfig(*config)
	if err != nil {
		return exitError{code: 2, msg: err.Error()}
	}
	logger := slog.New(slog.NewTextHandler(c.err, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if os.Getuid() != 0 {
		fmt.Fprintln(c.err, "niuma serve: not running as root: the service sees only your own processes, so a lease whose holder died is kept while its processes might still run; run it as root (make install-system)")
	}
	unlock, err := service.Lock(*db)
	if err != nil {
		return err
	}
	defer unlock()
	store, err := service.OpenStore(*db)
	if err != nil {
		return err
	}
	defer store.Close()
	gpus, err := gpumon.Open(ctx, gpumon.Config{NVML: gpumon.NVMLOptions{Owners: gpumon.NewOwners(nil), Logger: logger}})
	if err != nil {
		return exitError{code: 2, msg: err.Error()}
	}
	defer gpus.Close()
	if gpus.NVML != nil {
		// A GPU that raises an XID or ECC error is unhealthy in the
		// snapshots the service places by: no user's stage goes onto it.
		go func() {
			if err := gpus.NVML.WatchHealth(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("GPU health watch stopped", "err", err)
			}
		}()
	}
	users := &service.Users{}
	arb, err := service.NewArbiter(ctx, service.Options{Config: cfg, Store: store, GPUs: gpus.Source,
		Host: engine.ThisMachine(), Users: users, Logger: logger})
	if err != nil {
		return err
	}
	l, err := service.Listen(*socket)
	if err != nil {
		return err
	}
	// The socket stays when the service stops: users' Niuma then wait for
	// it, saying so, rather than taking the machine for themselves.
	l.SetUnlinkOnClose(false)
	fmt.Fprintf(c.err, "niuma serve: the machine service listens at %s (%s; %s)\n", *socket, describeConfig(cfg), describeGPUs(ctx, gpus))
	srv := &service.Server{Arbiter: arb, Users: users, Logger: logger}
	return srv.Serve(ctx, l)
}

func describeConfig(cfg service.Config) string {
	var teams []string
	for _, t := range cfg.Teams {
		teams = append(teams, fmt.Sprintf("%s %s GPU(s)", t.Name, strconv.FormatFloat(t.GPUs, 'f', -1, 64)))
	}
	ts := "no teams: one queue for every user"
	if len(teams) > 0 {
		ts = "teams " + strings.Join(teams, ", ")
	}
	admins := slices.Compact(append([]string{"root"}, cfg.Admins...))
	return fmt.Sprintf("%s; admins %s; policy %s; fair-share half-life %s", ts, strings.Join(admins, ", "), cfg.Policy,
		machine.FormatDuration(time.Duration(cfg.HalfLife)))
}

func describeGPUs(ctx context.Context, o gpumon.Opened) string {
	snap, err := o.Source.Snapshot(ctx)
	switch {
	case err != nil:
		return "GPUs unreadable: " + err.Error()
	case len(snap.GPUs) == 0:
		return "no GPU: " + snap.Reason
	case snap.Simulated:
		return fmt.Sprintf("%d simulated GPU(s)", len(snap.GPUs))
	}
	return fmt.Sprintf("%d GPU(s)", len(snap.GPUs))
}

// machineCmd is `niuma machine`: the machine as the service shows it to
// any user.
func (c *cli) machineCmd(ctx context.Context, args []string) error {
	fs := c.flags("machine")
	asJSON := fs.Bool("json", false, "print the machine's status as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return exitError{code: 2, msg: fmt.Sprintf("machine takes no arguments, got %q", pos)}
	}
	a := machineArbiter()
	if !a.Present() {
		return exitError{code: 1, msg: fmt.Sprintf("%v; no service socket at %s", engine.ErrNoMachine, machine.Socket())}
	}
	st, err := a.Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.out, st)
	}
	return writeMachine(c.out, st)
}

func writeMachine(out interface{ Write([]byte) (int, error) }, st machine.Status) error {
	who := "you are " + st.User
	if st.Team != "" {
		who += ", team " + st.Team
	}
	if st.Admin {
		who += " (an admin)"
	}
	sim := ""
	if st.Simulated {
		sim = " simulated"
	}
	fmt.Fprintf(out, "Shared machine: %d%s GPU(s), policy %s, fair-share half-life %s; %s\n", len(st.GPUs), sim, st.Policy,
		machine.FormatDuration(st.HalfLife), who)
	if len(st.Teams) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "TEAM", "SHARE", "HELD", "BORROWED", "LENT TO", "USAGE", "FAIR SHARE", "MEMBERS")
		for _, tm := range st.Teams {
			t.row(tm.Name, gpus(tm.Nominal), gpus(tm.Held), gpus(tm.Borrowed), lentTo(tm.LentTo),
				fmt.Sprintf("%.2f GPU-h", tm.Usage), fmt.Sprintf("%.2f", tm.FairShare), strings.Join(tm.Members, ", "))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	if len(st.Leases) == 0 {
		fmt.Fprintln(out, "No stage holds GPUs, CPUs or memory.")
	} else {
		t := newTable(out, "USER", "TEAM", "RUN", "NAME", "STAGE", "GPUS", "SINCE", "NOTE")
		for _, l := range st.Leases {
			note := ""
			if l.Borrowed {
				note = "borrowed: preemptible"
			}
			if l.Reclaim != "" {
				note = "being reclaimed: " + l.Reclaim
			}
			t.row(l.User, l.Team, l.Run, l.RunName, l.Stage, indices(l.Indices), l.Since.Local().Format("15:04:05"), note)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.Queue) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "WAITING", "TEAM", "RUN", "NAME", "STAGE", "GPUS", "WHY")
		for _, w := range st.Queue {
			t.row(w.User, w.Team, w.Run, w.RunName, w.Stage, strconv.Itoa(w.GPUs), w.Reason)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.Processes) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "GPU", "PID", "USER", "MEMORY", "RUN")
		for _, p := range st.Processes {
			pid := strconv.Itoa(p.PID)
			if p.PID == 0 {
				pid = "-"
			}
			t.row(gpuIndex(st, p.GPU), pid, orDash(p.User), fmt.Sprintf("%d MiB", p.MemMiB), orDash(p.Run))
		}
		return t.flush()
	}
	return nil
}

func gpus(v float64) string {
	if v == shepherd.NoLimit {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func lentTo(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeysOf(m) {
		parts = append(parts, fmt.Sprintf("%s %s", k, strconv.FormatFloat(m[k], 'f', 1, 64)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func sortedKeysOf(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func indices(xs []int) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.Itoa(x))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func gpuIndex(st machine.Status, uuid string) string {
	for _, g := range st.GPUs {
		if g.UUID == uuid {
			return strconv.Itoa(g.Index)
		}
	}
	return uuid
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cancelElsewhere cancels, through the machine service, a run this
// archive does not hold: another user's, which only an admin may.
func (c *cli) cancelElsewhere(ctx context.Context, eng *engine.Engine, ref string, notHere error) error {
	if !eng.Shared() {
		return notHere
	}
	res, err := eng.CancelElsewhere(ctx, ref)
	var refused *machine.Refused
	switch {
	case errors.As(err, &refused):
		return exitError{code: 1, msg: fmt.Sprintf("cannot cancel %s: %s", ref, refused.Reason)}
	case err != nil:
		return err
	}
	fmt.Fprintf(c.out, "cancelling %s's run %s (its owner's Niuma stops it at its next pass)\n", res.Owner, res.Run)
	return nil
}
