package sim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestZZDiag(t *testing.T) {
	team := os.Getenv("DIAG")
	if team == "" {
		t.Skip()
	}
	f, _ := os.Open("../../../shared/data/traces/philly.csv")
	col, _ := ReadColumn(f, "cluster")
	f.Seek(0, 0)
	jobs, _ := LoadPhilly(f, 32, 1)
	SetTeams(jobs, col)
	start, _ := strconv.ParseFloat(os.Getenv("START"), 64)
	load, _ := strconv.ParseFloat(os.Getenv("LOAD"), 64)
	w := Rescale(Window(jobs, start, 7), load, 32)
	teams, _ := SharesOf(w, 32, os.Getenv("MODE"))
	cfg := DefaultConfig()
	cfg.GPUs = 32
	shared := cfg
	shared.Teams = teams
	shared.HalfLife = 7 * 24 * time.Hour
	_, d := replay(w, shared, hooks{})
	var own []Job
	var nom float64
	for _, tm := range teams {
		if tm.Name == team {
			nom = tm.Nominal
		}
	}
	for _, j := range w {
		if j.Team == team {
			own = append(own, j)
		}
	}
	c := cfg
	c.GPUs = int(nom)
	c.GroupSize = c.GPUs
	_, sd := replay(own, c, hooks{})
	by := map[string]*sjob{}
	for _, j := range d {
		by[j.ID] = j
	}
	fmt.Println("nominal", nom)
	for _, s := range sd {
		j := by[s.ID]
		fmt.Printf("%s g=%d mem=%d pr=%d dur=%.0f sub=%.0f | static wait %.0f jct %.0f pre %d | shared wait %.0f jct %.0f pre %d\n",
			s.ID, s.GPUs, s.MemMilli, s.Priority, s.Duration, s.Submit, s.first-s.Submit, s.end-s.Submit, s.preempted, j.first-j.Submit, j.end-j.Submit, j.preempted)
	}
}
