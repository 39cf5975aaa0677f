package metrics

import (
	"testing"
	"time"
)

// FuzzHParams: any bytes, as an event file's, never panic the hparams
// reader, and what it returns has names and values of the three kinds.
func FuzzHParams(f *testing.F) {
	f.Add(eventFile(fileVersionEvent(), tbEvent(1, 1, simpleValue("a", 1))))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		for k, v := range HParams(b) {
			if k == "" {
				t.Fatal("empty name")
			}
			switch v.(type) {
			case float64, string, bool:
			default:
				t.Fatalf("%s: %T", k, v)
			}
		}
	})
}

// FuzzCSVRow: any row under any header never panics and gives points only
// for named columns.
var wallZero = time.Time{}

func FuzzCSVRow(f *testing.F) {
	f.Add("epoch,step,train_loss,val_loss", "0,49,0.7,")
	f.Add(`a,"b,c",step`, `1,"2",3`)
	f.Fuzz(func(t *testing.T, header, row string) {
		cf := &csvFile{stepCol: -1}
		cf.setHeader(header)
		var c CSVFollower
		c.row(cf, []byte(row), 0, wallZero)
		for _, p := range c.pts {
			if p.Key == "" && len(cf.cols) == 0 {
				t.Fatalf("a point without a column: %+v", p)
			}
		}
	})
}
