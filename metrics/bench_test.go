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

// bareInsertSQL is storage's statement (see storage/metrics.go and its
// migrations): the same columns, rows rows per statement. A point's series
// (run, stage, key, attempt) is a row of metric_series; seq numbers its
// points in arrival order.
func bareInsertSQL(rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO metric_points (series_id, step, seq, value, wall_ns) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?)`)
	}
	return b.String()
}

// BenchmarkIngest compares the whole metrics path with a plain batched
// insert of the same rows. Each op is 4096 rows (1024 lines of 4 metrics),
// on a fresh database file per sub-benchmark; rows/s is the number to read.
//
//   - bare: rows go straight through database/sql on db.SQL(): one
//     transaction per op, a prepared multi-row INSERT of bareRowsPerStmt
//     rows, in the order the lines give them (the four series' ids are
//     created before the clock starts).
//   - parse+store: the same rows as JSON lines through the Ingestor (as a
//     Collector sets it up for stdout: lenient Parser, segments, prefixes,
//     each line's cursor), Writer and storage.InsertMetrics (which also
//     keeps the series' summaries and stores the cursors), ending with
//     Flush.
func BenchmarkIngest(b *testing.B) {
	b.Run("bare", benchBare)
	b.Run("parse+store", benchParseStore)
}

// bareRowsPerStmt rows per INSERT: 4096 rows x 5 columns = 20480
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
	var series [benchKeysPerLine]any // boxed ids
	for k, key := range benchKeys {
		res, err := sqldb.ExecContext(ctx, `INSERT INTO metric_series (run_id, stage, key, attempt) VALUES (?, ?, ?, 1)`,
			benchRun, benchStage, key)
		if err != nil {
			b.Fatal(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			b.Fatal(err)
		}
		series[k] = id
	}
	args := make([]any, 0, bareRowsPerStmt*5)
	vals := benchValues(b.N * benchLinesPerOp)
	b.ResetTimer()
	cpu0 := processCPU()
	step := int64(0)
	for range b.N {
		tx, err := sqldb.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		txst := tx.StmtContext(ctx, stmt)
		var wall any = time.Now().UnixNano()
		for range benchRowsPerOp / bareRowsPerStmt {
			args = args[:0]
			for range bareRowsPerStmt / benchKeysPerLine {
				for k := range benchKeys {
					args = append(args, series[k], step, step+1, vals[step*benchKeysPerLine+int64(k)], wall)
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
	reportIngest(b, db, cpu0)
}

func benchParseStore(b *testing.B) {
	ctx := context.Background()
	db := openTestDB(b, benchRun)
	// The input: every line of the run, made before the clock starts, in one
	// buffer (ends[i] is where line i ends) so the GC has little to scan.
	vals := benchValues(b.N * benchLinesPerOp)
	var buf []byte
	ends := make([]int, 0, b.N*benchLinesPerOp)
	for s := range int64(b.N * benchLinesPerOp) {
		buf = benchLine(buf, s, vals[s*benchKeysPerLine:])
		ends = append(ends, len(buf))
	}
	w := NewWriter(db, WriterOptions{Logger: quiet})
	in := NewIngestor(w, benchRun, benchStage, 1, nil)
	in.SetSource("stdout", 0)
	b.ResetTimer()
	cpu0 := processCPU()
	start := 0
	for _, end := range ends {
		line := buf[start:end]
		start = end
		if _, ok := in.LineAt(line, int64(end), time.Now()); !ok {
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
	if s := w.Stats(); s.Errors != 0 || s.Points != uint64(b.N*benchRowsPerOp) {
		b.Fatalf("writer stats %+v", s)
	}
	reportIngest(b, db, cpu0)
}

// reportIngest checks that every row arrived and reports rows/s (wall
// clock) and, where the platform tells, the CPU time this process spent per
// row (user+system, all threads), which other load on the machine disturbs
// less than the wall clock.
func reportIngest(b *testing.B, db *storage.DB, cpu0 int64) {
	cpu := processCPU() - cpu0
	rows := b.N * benchRowsPerOp
	var n int
	if err := db.SQL().QueryRowContext(context.Background(), `SELECT count(*) FROM metric_points`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n != rows {
		b.Fatal(fmt.Sprintf("%d rows stored, want %d", n, rows))
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	if cpu0 >= 0 {
		b.ReportMetric(float64(cpu)/float64(rows), "cpu-ns/row")
	}
}
