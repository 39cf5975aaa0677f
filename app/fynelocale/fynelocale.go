// Package fynelocale keeps Fyne from complaining about the POSIX locale.
//
// Fyne parses the user's locale while its packages initialise, and logs an
// error for "C" or "POSIX" — the locale of CI machines, containers and many
// ssh sessions — on every start, CLI commands included. This package is
// imported by package app ahead of Fyne, sets LC_ALL to a tag Fyne can
// parse for that moment only, and Restore puts the user's environment back
// before anything (a stage's process above all) can see the change.
//
// It relies on Go's package initialisation order: a package is initialised
// after its imports, and this one imports only os, so it runs before
// Fyne's lang package, which imports far more.
package fynelocale

import (
	"os"
	"strings"
)

// vars are what locale lookups read, highest priority first.
var vars = []string{"LC_ALL", "LC_MESSAGES", "LANG"}

type saved struct {
	value string
	set   bool
}

var original map[string]saved

func init() {
	for _, k := range vars {
		if v := os.Getenv(k); v != "" {
			if v == "C" || v == "POSIX" || strings.HasPrefix(v, "C.") {
				break // the one in force is POSIX: replace it
			}
			return // a real locale is in force
		}
	}
	original = map[string]saved{}
	for _, k := range vars {
		v, ok := os.LookupEnv(k)
		original[k] = saved{v, ok}
	}
	_ = os.Setenv("LC_ALL", "en_US.UTF-8")
}

// Restore undoes what init changed. It is safe to call more than once.
func Restore() {
	for k, s := range original {
		if s.set {
			_ = os.Setenv(k, s.value)
		} else {
			_ = os.Unsetenv(k)
		}
	}
	original = nil
}
