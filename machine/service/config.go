package service

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"niuma/shepherd"
)

// Config is the service's settings file (machine.yaml):
//
//	teams:
//	  - {name: vision, group: vision, gpus: 4, borrow_limit: 2}
//	  - {name: nlp, users: [ana, bo], gpus: 4, lend_limit: 2}
//	admins: [root, lab-admin]
//	half_life: 7d     # fair share forgets half of a team's use in this time
//	grace: 30s        # a reclaimed borrower's time between SIGTERM and SIGKILL
//	policy: herd
//
// Without teams, every user's runs share one queue (by priority, as on a
// single user's machine) and none is ever reclaimed; the service still
// keeps two users' stages off one GPU.
type Config struct {
	Teams    []TeamConfig `yaml:"teams"`
	Admins   []string     `yaml:"admins"`
	HalfLife Duration     `yaml:"half_life"`
	Grace    Duration     `yaml:"grace"`
	Policy   string       `yaml:"policy"`
}

// TeamConfig is one team: its members are the users listed and the
// members of the Unix group named (a user listed by name in one team
// belongs to it, whatever their groups).
type TeamConfig struct {
	Name  string   `yaml:"name"`
	Users []string `yaml:"users"`
	Group string   `yaml:"group"`
	// GPUs is the team's nominal share.
	GPUs float64 `yaml:"gpus"`
	// BorrowLimit is the most GPUs above its share it may hold; nil: as
	// many as are idle. LendLimit is the most of its idle share others may
	// borrow; nil: all of it.
	BorrowLimit *float64 `yaml:"borrow_limit"`
	LendLimit   *float64 `yaml:"lend_limit"`
}

// Defaults of the settings a file leaves out.
const (
	DefaultHalfLife = 7 * 24 * time.Hour // Slurm's PriorityDecayHalfLife
	DefaultGrace    = 30 * time.Second
	DefaultPolicy   = "herd"
)

// Duration is a YAML duration: Go's form ("90s", "1h30m") or whole days
// ("7d").
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads "90s", "1h30m" or "7d".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("duration %q: write a positive number of days, e.g. 7d", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("duration %q: write a positive duration such as 30s, 1h or 7d", s)
	}
	return v, nil
}

// LoadConfig reads the settings file at path; a file that does not exist
// gives the defaults (no teams). Every mistake is an error naming the
// file, the line where it can, and what to write instead.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}.withDefaults(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read the machine service's settings: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig reads settings from YAML and checks them.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s (the settings are teams, admins, half_life, grace and policy; a team has name, users, group, gpus, borrow_limit and lend_limit)", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := c.check(); err != nil {
		return Config{}, err
	}
	return c.withDefaults(), nil
}

func (c Config) withDefaults() Config {
	if c.HalfLife == 0 {
		c.HalfLife = Duration(DefaultHalfLife)
	}
	if c.Grace == 0 {
		c.Grace = Duration(DefaultGrace)
	}
	if c.Policy == "" {
		c.Policy = DefaultPolicy
	}
	return c
}

func (c Config) check() error {
	names := map[string]bool{}
	users := map[string]string{}
	for i, t := range c.Teams {
		switch {
		case strings.TrimSpace(t.Name) == "":
			return fmt.Errorf("team %d has no name: give it one, e.g. name: vision", i+1)
		case names[t.Name]:
			return fmt.Errorf("team %s is listed twice: merge the two entries", t.Name)
		case t.GPUs < 0:
			return fmt.Errorf("team %s: gpus is %g; give its share as 0 or more GPUs", t.Name, t.GPUs)
		case len(t.Users) == 0 && t.Group == "":
			return fmt.Errorf("team %s has no members: list its users (users: [ana, bo]) or name its Unix group (group: %s)", t.Name, t.Name)
		case t.BorrowLimit != nil && *t.BorrowLimit < 0:
			return fmt.Errorf("team %s: borrow_limit is %g; give 0 or more GPUs, or leave it out for no limit", t.Name, *t.BorrowLimit)
		case t.LendLimit != nil && *t.LendLimit < 0:
			return fmt.Errorf("team %s: lend_limit is %g; give 0 or more GPUs, or leave it out for no limit", t.Name, *t.LendLimit)
		}
		names[t.Name] = true
		for _, u := range t.Users {
			if other, ok := users[u]; ok {
				return fmt.Errorf("user %s is listed in teams %s and %s: a user belongs to one team", u, other, t.Name)
			}
			users[u] = t.Name
		}
	}
	if c.Policy != "" {
		if _, err := shepherd.ByName(c.Policy); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	}
	return nil
}

// teams is the shepherd's view of the configured teams; nil without any.
func (c Config) teams() []shepherd.Team {
	var out []shepherd.Team
	for _, t := range c.Teams {
		st := shepherd.Team{Name: t.Name, Nominal: t.GPUs, BorrowLimit: shepherd.NoLimit, LendLimit: shepherd.NoLimit}
		if t.BorrowLimit != nil {
			st.BorrowLimit = *t.BorrowLimit
		}
		if t.LendLimit != nil {
			st.LendLimit = *t.LendLimit
		}
		out = append(out, st)
	}
	return out
}

// teamOf is the team of a user with the given Unix groups: the team that
// lists the user, else the first whose group they are in, else "".
func (c Config) teamOf(user string, groups []string) string {
	for _, t := range c.Teams {
		for _, u := range t.Users {
			if u == user {
				return t.Name
			}
		}
	}
	for _, t := range c.Teams {
		for _, g := range groups {
			if t.Group != "" && g == t.Group {
				return t.Name
			}
		}
	}
	return ""
}

// isAdmin says whether a user may cancel any user's run: root always, and
// those the settings list.
func (c Config) isAdmin(uid int, user string) bool {
	if uid == 0 {
		return true
	}
	for _, a := range c.Admins {
		if a == user {
			return true
		}
	}
	return false
}
