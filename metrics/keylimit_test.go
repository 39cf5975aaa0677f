package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first Max keys of a stage are kept and keep flowing; points of later
// keys are dropped, and the limit is told once, with how many keys the
// first record over it carried.
func TestIngestorKeyLimit(t *testing.T) {
	type told struct{ max, ignored int }
	var tells []told
	l := NewKeyLimit(3, nil, func(max, ignored int) { tells = append(tells, told{max, ignored}) })
	in := NewIngestor(nil, "r1", "train", 1, nil)
	in.SetKeyLimit(l)
	wall := time.Now()

	pts, _ := in.Line([]byte(`{"step": 0, "a": 1, "b": 2}`), wall)
	assert.Equal(t, []string{"a@0", "b@0"}, keysAndSteps(pts))
	assert.Empty(t, tells)

	pts, ok := in.Line([]byte(`{"step": 1, "a": 1, "c": 3, "x1": 1, "x2": 2}`), wall)
	assert.True(t, ok, "still a metric line")
	assert.Equal(t, []string{"a@1", "c@1"}, keysAndSteps(pts), "c fills the limit; x1 and x2 are beyond it")
	assert.Equal(t, []told{{3, 2}}, tells, "two distinct keys beyond the limit")

	pts, _ = in.Line([]byte(`{"step": 2, "a": 1, "b": 2, "c": 3, "y": 4}`), wall)
	assert.Equal(t, []string{"a@2", "b@2", "c@2"}, keysAndSteps(pts), "admitted keys keep flowing")
	assert.Len(t, tells, 1, "told once")
	assert.Equal(t, int64(3), l.Dropped(), "x1, x2, y")

	// Another source of the same stage shares the limit.
	other := NewIngestor(nil, "r1", "train", 1, nil)
	other.SetKeyLimit(l)
	pts, _ = other.Line([]byte(`{"step": 3, "c": 1, "z": 2}`), wall)
	assert.Equal(t, []string{"c@3"}, keysAndSteps(pts))
}

// Refused keys are not remembered: a workload that invents a key per line
// cannot grow the limit's memory beyond its Max keys.
func TestKeyLimitRemembersOnlyAdmittedKeys(t *testing.T) {
	l := NewKeyLimit(100, nil, nil)
	g := keyGate{limit: l}
	for i := range 100_000 {
		g.admit(fmt.Sprintf("k%d", i))
		if i%1000 == 999 {
			g.endRecord()
		}
	}
	g.endRecord()
	assert.Len(t, l.keys, 100)
	assert.Len(t, g.known, 100)
	assert.Empty(t, g.refused)
	assert.Equal(t, int64(99_900), l.Dropped())
	var nilLimit *KeyLimit
	assert.True(t, nilLimit.Admit("any"), "no limit")
}

// The limit holds across the stage's sources (stdout, TensorBoard, CSV) and
// across an adoption: the keys an attempt stored before a restart count.
func TestCollectKeyLimitAcrossSourcesAndRestarts(t *testing.T) {
	r := newCollectRig(t)
	r.maxKeys = 4
	appendFile(t, r.stdout, `{"step": 0, "a": 1, "b": 1}`+"\n"+
		`{"step": 1, "a": 2, "c": 1, "d": 1, "e": 1, "f": 1}`+"\n"+
		`{"step": 2, "a": 3, "g": 1}`+"\n")
	r.collect()
	assert.Equal(t, []float64{1, 2, 3}, values(r.series("a")))
	assert.Len(t, r.series("d"), 1)
	assert.Empty(t, r.series("e"))
	assert.Empty(t, r.series("g"))
	require.Len(t, r.notes, 1)
	assert.Equal(t, "metrics_keys_limit: stage train reported more than 4 distinct metric keys, the limit per stage: "+
		"its first 4 keys are kept and go on being recorded; 2 more keys in the same line, and every new key after them, are ignored",
		r.notes[0])

	// Adopted after a restart, the attempt writes TensorBoard and CSV too.
	appendFile(t, r.stdout, `{"step": 3, "a": 4, "h": 1}`+"\n")
	tb := filepath.Join(r.stageDir, "tb", "events.out.tfevents.1.host")
	require.NoError(t, os.MkdirAll(filepath.Dir(tb), 0o755))
	appendBytes(t, tb, eventFile(tbEvent(1.7e9, 4, simpleValue("b", 5), simpleValue("tb_new", 1))))
	csvPath := filepath.Join(r.stageDir, "lightning_logs", "version_0", "metrics.csv")
	require.NoError(t, os.MkdirAll(filepath.Dir(csvPath), 0o755))
	appendFile(t, csvPath, "step,c,csv_new\n5,7,1\n")
	r.collect()
	assert.Equal(t, []float64{1, 2, 3, 4}, values(r.series("a")))
	assert.Equal(t, []int64{0, 4}, steps(r.series("b")), "TensorBoard's point of an admitted key")
	assert.Equal(t, []int64{1, 5}, steps(r.series("c")), "the CSV's")
	for _, k := range []string{"h", "tb_new", "csv_new"} {
		assert.Empty(t, r.series(k), "%s: a fifth key", k)
	}
	require.Len(t, r.notes, 2, "this reading of the attempt tells once too")
	assert.True(t, strings.HasPrefix(r.notes[1], "metrics_keys_limit: "), r.notes[1])
}
