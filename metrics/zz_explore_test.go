package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func BenchmarkExploreBare(b *testing.B) {
	for _, per := range []int{128, 1024, 4096} {
		for _, conflict := range []bool{true, false} {
			b.Run(fmt.Sprintf("per=%d/conflict=%v", per, conflict), func(b *testing.B) {
				ctx := context.Background()
				db := openTestDB(b, benchRun)
				sqldb := db.SQL()
				q := bareInsertSQL(per)
				if !conflict {
					q = q[:strings.Index(q, " ON CONFLICT")]
				}
				stmt, err := sqldb.PrepareContext(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				defer stmt.Close()
				args := make([]any, 0, per*7)
				b.ResetTimer()
				step := int64(0)
				for range b.N {
					tx, _ := sqldb.BeginTx(ctx, nil)
					txst := tx.StmtContext(ctx, stmt)
					wall := time.Now().UnixNano()
					for range benchRowsPerOp / per {
						args = args[:0]
						for range per / benchKeysPerLine {
							for k, key := range benchKeys {
								args = append(args, benchRun, benchStage, key, 1, step, benchValue(k, step), wall)
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
				b.ReportMetric(float64(b.N*benchRowsPerOp)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
