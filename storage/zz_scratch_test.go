package storage

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkScratchNorm(b *testing.B) {
	const upsert4 = ` ON CONFLICT (series_id, step) DO UPDATE SET value = excluded.value, wall_ns = excluded.wall_ns`
	const seriesDDL = `CREATE TABLE s (id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO s VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10);`
	variants := []struct {
		name, ddl, verb, suffix string
	}{
		{"bare-noindex", `CREATE TABLE mp (series_id INT, step INT, value REAL, wall_ns INT)`, "INSERT", ""},
		{"wor-upsert", `CREATE TABLE mp (series_id INTEGER NOT NULL, step INTEGER NOT NULL, value REAL, wall_ns INTEGER, PRIMARY KEY (series_id, step)) WITHOUT ROWID`, "INSERT", upsert4},
		{"wor-insert", `CREATE TABLE mp (series_id INTEGER NOT NULL, step INTEGER NOT NULL, value REAL, wall_ns INTEGER, PRIMARY KEY (series_id, step)) WITHOUT ROWID`, "INSERT", ""},
		{"wor-upsert-fk", seriesDDL + `CREATE TABLE mp (series_id INTEGER NOT NULL REFERENCES s(id) ON DELETE CASCADE, step INTEGER NOT NULL, value REAL, wall_ns INTEGER, PRIMARY KEY (series_id, step)) WITHOUT ROWID`, "INSERT", upsert4},
	}
	for _, v := range variants {
		for _, grouped := range []bool{false, true} {
			for _, rowsPer := range []int{128, 256} {
				b.Run(fmt.Sprintf("%s/grouped=%v/rows=%d", v.name, grouped, rowsPer), func(b *testing.B) {
					d, err := sql.Open("sqlite3", dsn(filepath.Join(b.TempDir(), "x.db"), false))
					if err != nil {
						b.Fatal(err)
					}
					defer d.Close()
					d.SetMaxOpenConns(1)
					if _, err := d.Exec(v.ddl); err != nil {
						b.Fatal(err)
					}
					q := v.verb + ` INTO mp (series_id, step, value, wall_ns) VALUES ` + strings.TrimSuffix(strings.Repeat("(?,?,?,?),", rowsPer), ",") + v.suffix
					st, err := d.Prepare(q)
					if err != nil {
						b.Fatal(err)
					}
					args := make([]any, rowsPer*4)
					wall := time.Now().UnixNano()
					const batch = 256 * 20
					type p struct{ sid, step int64 }
					pts := make([]p, batch)
					step := int64(0)
					c0 := cpuNow()
					b.ResetTimer()
					for b.Loop() {
						for i := range pts {
							if i%10 == 0 {
								step++
							}
							pts[i] = p{int64(i%10 + 1), step}
						}
						if grouped {
							slices.SortStableFunc(pts, func(a, b p) int { return int(a.sid - b.sid) })
						}
						tx, _ := d.BeginTx(context.Background(), nil)
						ts := tx.Stmt(st)
						for j := 0; j < batch/rowsPer; j++ {
							for i := 0; i < rowsPer; i++ {
								x := pts[j*rowsPer+i]
								r := args[i*4:]
								r[0], r[1], r[2], r[3] = x.sid, x.step, float64(x.step)*0.001, wall
							}
							if _, err := ts.Exec(args...); err != nil {
								b.Fatal(err)
							}
						}
						if err := tx.Commit(); err != nil {
							b.Fatal(err)
						}
					}
					n := float64(batch) * float64(b.N)
					b.ReportMetric(n/b.Elapsed().Seconds(), "rows/s")
					b.ReportMetric(n/(cpuNow()-c0).Seconds(), "rows/cpu-s")
				})
			}
		}
	}
}
