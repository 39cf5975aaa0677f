package fynelocale

import (
	"os"
	"testing"
)

func TestRestorePutsTheEnvironmentBack(t *testing.T) {
	t.Setenv("LC_ALL", "")
	os.Unsetenv("LC_ALL")
	t.Setenv("LANG", "C")
	original = map[string]saved{"LC_ALL": {}, "LANG": {"C", true}}
	os.Setenv("LC_ALL", "en_US.UTF-8")
	Restore()
	if _, ok := os.LookupEnv("LC_ALL"); ok {
		t.Fatal("LC_ALL was not unset")
	}
	if os.Getenv("LANG") != "C" {
		t.Fatalf("LANG = %q, want C", os.Getenv("LANG"))
	}
	Restore() // twice is harmless
}
