package metrics

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"niuma/storage"
)

// The ingest benchmark's workload: a training loop printing one JSON line
// per step with four metrics, as Python's json.dumps writes them.
const (
	benchKeysPerLine = 4
	benchRowsPerOp   = 4096 // one op = one transaction's worth of rows
	benchLinesPerOp  = benchRowsPerOp / benchKeysPerLine
	benchRun         = "bench"
	benchStage       = "train"
)

var benchKeys = [benchKeysPerLine]string{"loss", "val_loss", "acc", "lr"}

// benchValue is the value of key k at step s: smooth curves with noise,
// so that most values need all 17 significant digits, like real ones.
func benchValue(k int, s int64) float64 {
	x := float64(s)
	noise := math.Sin(x*12.9898+float64(k)*78.233) * 0.01
	switch k {
	case 0:
		return 2.5*math.Exp(-x/50000) + 0.1 + noise
	case 1:
		return 2.6*math.Exp(-x/50000) + 0.15 + noise
	case 2:
		return 1 - 0.9*math.Exp(-x/40000) + noise/10
	default:
		return 3e-4 * math.Pow(0.5, math.Floor(x/100000))
	}
}

// benchValues returns the values of steps [0, steps): value k of step s is
// at s*benchKeysPerLine+k. Both benchmarks get them ready-made.
func benchValues(steps int) []float64 {
	vals := make([]float64, steps*benchKeysPerLine)
	for s := range steps {
		for k := range benchKeysPerLine {
			vals[s*benchKeysPerLine+k] = benchValue(k, int64(s))
		}
	}
	return vals
}

// benchLine appends the JSON line of step s.
func benchLine(b []byte, s int64, vals []float64) []byte {
	b = append(b, `{"step": `...)
	b = strconv.AppendInt(b, s, 10)
	for k, key := range benchKeys {
		b = append(b, `, "`...)
		b = append(b, key...)
		b = append(b, `": `...)
		b = strconv.AppendFloat(b, vals[k], 'g', -1, 64) // Python's repr
	}
	return append(b, '}')
}

// bareInsertSQL is storage's statement: the same columns and conflict rule,
// rows rows per statement.
func bareInsertSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO metric_points (run_id, stage, key, attempt, step, value, wall_ns) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?,?,?)`)
	}
	b.WriteString(` ON CONFLICT (run_id, stage, key, attempt, step) DO UPDATE SET value = excluded.value, wall_ns = excluded.wall_ns`)
	return b.String()
}

// BenchmarkIngest compares the whole metrics path with a plain batched
// insert of the same rows. Each op is 4096 rows (1024 lines of 4 metrics),
// on a fresh database file per sub-benchmark; rows/s is the number to read.
//
//   - bare: rows go straight through database/sql on db.SQL(): one
//     transaction per op, a prepared multi-row INSERT of bareRowsPerStmt rows.
//   - parse+store: the same rows as JSON lines through Parser, Ingestor,
//     Writer and storage.InsertMetricPoints, ending with Flush.
func BenchmarkIngest(b *testing.B) {
	b.Run("bare", benchBare)
	b.Run("parse+store", benchParseStore)
}

// bareRowsPerStmt rows per INSERT: 4096 rows x 7 columns = 28672
// parameters, under SQLite's limit of 32766.
const bareRowsPerStmt = 4096

func benchBare(b *testing.B) {
	ctx := context.Background()
	db := openTestDB(b, benchRun)
	sqldb := db.SQL()
	stmt, err := sqldb.PrepareContext(ctx, bareInsertSQL(bareRowsPerStmt))
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	args := make([]any, 0, bareRowsPerStmt*7)
	vals := benchValues(b.N * benchLinesPerOp)
	b.ResetTimer()
	step := int64(0)
	for range b.N {
		tx, err := sqldb.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		txst := tx.StmtContext(ctx, stmt)
		wall := time.Now().UnixNano()
		for range benchRowsPerOp / bareRowsPerStmt {
			args = args[:0]
			for range bareRowsPerStmt / benchKeysPerLine {
				for k, key := range benchKeys {
					args = append(args, benchRun, benchStage, key, 1, step, vals[step*benchKeysPerLine+int64(k)], wall)
				}
				step++
			}
			if _, err := txst.ExecContext(ctx, args...); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	checkRows(b, db, b.N*benchRowsPerOp)
	b.ReportMetric(float64(b.N*benchRowsPerOp)/b.Elapsed().Seconds(), "rows/s")
}

func benchParseStore(b *testing.B) {
	ctx := context.Background()
	db := openTestDB(b, benchRun)
	// The input: every line of the run, made before the clock starts.
	vals := benchValues(b.N * benchLinesPerOp)
	lines := make([][]byte, 0, b.N*benchLinesPerOp)
	var buf []byte
	for s := range int64(b.N * benchLinesPerOp) {
		start := len(buf)
		buf = benchLine(buf, s, vals[s*benchKeysPerLine:])
		lines = append(lines, buf[start:len(buf):len(buf)])
	}
	w := NewWriter(db, WriterOptions{Logger: quiet})
	in := NewIngestor(w, benchRun, benchStage, 1, nil)
	b.ResetTimer()
	for _, line := range lines {
		if _, ok := in.Line(line, time.Now()); !ok {
			b.Fatalf("not a metric line: %s", line)
		}
	}
	if err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	checkRows(b, db, b.N*benchRowsPerOp)
	if s := w.Stats(); s.Errors != 0 || s.Points != uint64(b.N*benchRowsPerOp) {
		b.Fatalf("writer stats %+v", s)
	}
	b.ReportMetric(float64(b.N*benchRowsPerOp)/b.Elapsed().Seconds(), "rows/s")
}

func checkRows(b *testing.B, db *storage.DB, want int) {
	n, err := db.CountMetricPoints(context.Background(), benchRun)
	if err != nil {
		b.Fatal(err)
	}
	if n != want {
		b.Fatal(fmt.Sprintf("%d rows stored, want %d", n, want))
	}
}
