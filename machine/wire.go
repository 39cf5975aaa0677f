package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"niuma/shepherd"
)

// DefaultSocket is where the machine service listens unless
// NIUMA_MACHINE_SOCKET says otherwise.
const DefaultSocket = "/run/niuma/niuma.sock"

// Arbiter is what a user's engine asks of the machine service. *Client
// implements it; tests of the engine use fakes.
type Arbiter interface {
	// Place replaces this Niuma's queue at the service with ask.Queue,
	// refreshes the leases of ask.Running, and returns one decision per
	// queue entry, in order, with what the service wants of this user's
	// running stages (Reclaim) and runs (Cancel).
	Place(ctx context.Context, ask Ask) (Answer, error)
	// Claim confirms, just before an attempt is launched, that it holds
	// its lease (taking one when the lease was given up meanwhile and its
	// GPUs are still free). A refusal is a *Refused: the attempt must not
	// be launched.
	Claim(ctx context.Context, c Claim) error
	// Release gives up the lease of an attempt that has ended.
	Release(ctx context.Context, token string) error
	// Status is the whole machine as any user may see it.
	Status(ctx context.Context) (Status, error)
	// Cancel asks for another user's run to be cancelled: allowed for an
	// admin (the owner's Niuma stops it at its next pass), refused with a
	// *Refused for anyone else.
	Cancel(ctx context.Context, run string) (CancelResult, error)
}

// Ask is one scheduling pass of a user's engine.
type Ask struct {
	// Home is the asking Niuma's data directory: one user may have more
	// than one, each with its own queue and leases.
	Home    string
	Queue   []Entry
	Running []Held
}

// Entry is a ready stage that asks to be placed.
type Entry struct {
	// Token is the token its next attempt will carry: the key of the
	// lease a placement gives it. The engine keeps it until the attempt
	// is recorded, so that asking again is idempotent.
	Token   string
	Run     string // run ID
	RunName string // the template's name, shown to other users
	Stage   string
	// Request is shepherd.Build of the stage's Need (ID "RUN/STAGE"); the
	// service sets its Team.
	Request shepherd.Request
}

// Held is an attempt the engine follows (running, or recorded as starting):
// its lease stays with this connection.
type Held struct {
	Token   string
	Run     string
	RunName string
	Stage   string
	// Placement is what it holds (shepherd.Request.Placement of its
	// request on its GPUs' UUIDs).
	Placement shepherd.Running
}

// Answer is the service's answer to an Ask.
type Answer struct {
	// Decisions has one entry per Ask.Queue entry, in order. A placed one
	// holds a lease under its entry's token.
	Decisions []shepherd.Decision
	// Reclaim lists this user's running attempts (by token) the machine
	// wants back: borrowed GPUs their owner team wants. The engine
	// preempts them as it preempts spot runs (SIGTERM, grace,
	// NIUMA_RESUME on the next attempt).
	Reclaim []Reclaim
	// Cancel lists this user's runs an admin cancelled.
	Cancel []CancelOrder
	User   string // the asking user, as the service knows them
	Team   string // their team ("" where no team lists them)
}

// Reclaim asks for a running attempt to be preempted.
type Reclaim struct {
	Token string
	Why   string // "team vision wants its share back (2 of 2 GPUs)"
	// Grace is how long the attempt has between SIGTERM and SIGKILL (the
	// service's setting); 0: the engine's own.
	Grace time.Duration
}

// CancelOrder is an admin's cancel of a run.
type CancelOrder struct {
	Run string
	By  string // the admin's user name
}

// Claim is Arbiter.Claim's argument.
type Claim struct {
	Home    string
	Token   string
	Run     string
	RunName string
	Stage   string
	// Placement is what the attempt is about to hold.
	Placement shepherd.Running
}

// CancelResult says whose run an admin's cancel went to.
type CancelResult struct {
	Owner string // the run's user
	Run   string
}

// Refused is the service's no: Reason says why in words.
type Refused struct{ Reason string }

func (r *Refused) Error() string { return r.Reason }

// ErrUnreachable wraps every failure to reach a service that is installed
// (its socket exists): the engine waits for it rather than placing alone.
var ErrUnreachable = errors.New("the machine service is not answering")

// Unreachable wraps err as ErrUnreachable, naming the socket.
func Unreachable(socket string, err error) error {
	return fmt.Errorf("%w (%s): %w", ErrUnreachable, socket, err)
}

// Status is the whole machine as any user may see it: who holds and waits
// for what, by user and run name, never a run's parameters, logs or
// metrics.
type Status struct {
	User     string        `json:"user"`  // the asking user, as the service knows them
	Team     string        `json:"team"`  // their team ("" where no team lists them)
	Admin    bool          `json:"admin"` // the asking user may cancel any run
	Since    time.Time     `json:"since"` // when the service started
	HalfLife time.Duration `json:"half_life_ns"`
	Policy   string        `json:"policy"`
	Admins   []string      `json:"admins,omitempty"`
	GPUs     []GPU         `json:"gpus,omitempty"`
	// Simulated: the service's GPUs are simulated (NIUMA_SIMULATE_GPUS),
	// and so are the processes it lists (one per lease).
	Simulated bool      `json:"simulated"`
	Teams     []Team    `json:"teams,omitempty"`
	Leases    []Lease   `json:"leases,omitempty"`
	Queue     []Waiting `json:"queue,omitempty"`
	// Processes is every process on a GPU, with its user.
	Processes []Process `json:"processes,omitempty"`
}

// GPU is one placeable device of the machine.
type GPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	TotalMiB int64  `json:"total_mib"`
	UsedMiB  int64  `json:"used_mib"`
}

// Team is one team's part of the machine now.
type Team struct {
	Name        string   `json:"name"`
	Members     []string `json:"members,omitempty"` // user names (from the settings or the Unix group)
	Nominal     float64  `json:"nominal"`           // GPUs owed to it
	BorrowLimit float64  `json:"borrow_limit"`      // shepherd.NoLimit: none
	LendLimit   float64  `json:"lend_limit"`        // shepherd.NoLimit: none
	Held        float64  `json:"held"`              // GPUs its runs hold
	Borrowed    float64  `json:"borrowed"`          // of those, beyond its share
	// LentTo is, per borrowing team, how many of this team's idle GPUs it
	// holds; BorrowedFrom the reverse.
	LentTo       map[string]float64 `json:"lent_to,omitempty"`
	BorrowedFrom map[string]float64 `json:"borrowed_from,omitempty"`
	Usage        float64            `json:"usage"`      // decayed GPU-hours
	FairShare    float64            `json:"fair_share"` // Slurm's fair-share factor, 0..1 (1: used least against its share)
	// Reclaimable are the leases (IDs) that would be preempted first
	// should this team's lenders want their GPUs back.
	Reclaimable []string `json:"reclaimable,omitempty"`
}

// Lease is a stage's hold on GPUs, CPUs and memory.
type Lease struct {
	// ID names the lease in a status (Team.Reclaimable lists IDs). It is
	// not its attempt's token, which only the holder knows.
	ID       string    `json:"id"`
	User     string    `json:"user"`
	Team     string    `json:"team"`
	Run      string    `json:"run"`
	RunName  string    `json:"run_name"`
	Stage    string    `json:"stage"`
	GPUs     []string  `json:"gpus,omitempty"`    // UUIDs
	Indices  []int     `json:"indices,omitempty"` // the GPUs' indices, as the board shows them
	CPUMilli int64     `json:"cpu_milli"`
	MemMiB   int64     `json:"mem_mib"`
	Since    time.Time `json:"since"`
	Borrowed bool      `json:"borrowed"` // beyond its team's share: preemptible
	Reclaim  string    `json:"reclaim"`  // non-empty while the machine wants it back: why
	Live     bool      `json:"live"`     // its holder named it lately
}

// Waiting is a queued stage of some user.
type Waiting struct {
	User    string              `json:"user"`
	Team    string              `json:"team"`
	Run     string              `json:"run"`
	RunName string              `json:"run_name"`
	Stage   string              `json:"stage"`
	GPUs    int                 `json:"gpus"`
	Since   time.Time           `json:"since"`
	Code    shepherd.ReasonCode `json:"code"`
	Reason  string              `json:"reason"`
}

// Process is a process on a GPU.
type Process struct {
	GPU    string `json:"gpu"` // UUID
	PID    int    `json:"pid"`
	User   string `json:"user"` // "" when it could not be told
	MemMiB int64  `json:"mem_mib"`
	Run    string `json:"run"` // the run it belongs to, when it is a lease's
}

// FormatDuration writes a setting's duration as the settings file does:
// "7d", "12h", "30s", else Go's form.
func FormatDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
