package tabular

import (
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"niuma/tuner"
)

// Table is a tabular benchmark: a grid of configurations and their
// results per seed.
type Table struct {
	Name   string // the file's base name
	Metric string
	Goal   tuner.Goal
	Space  tuner.Space
	// grid holds each numeric parameter's sorted values; choices are in
	// Space.
	grid map[string][]float64
	rows map[string][]float64 // configuration key -> one value per seed
	mean map[string]float64
	best float64 // the best mean in the table
}

// Load reads a table: a CSV (gzip'd when the name ends in .gz) whose
// columns are the parameters, then one value column per seed named
// METRIC_seedN. An empty value cell means that seed was not run. The goal
// is min for a metric ending in mse or loss, max otherwise.
func Load(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: not a gzip file: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	t, err := read(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Name = filepath.Base(path)
	return t, nil
}

func read(r io.Reader) (*Table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("no header line: %w", err)
	}
	if err := checkHeader(head); err != nil {
		return nil, err
	}
	var pcols, vcols []int
	for i, h := range head {
		if strings.Contains(h, "_seed") {
			vcols = append(vcols, i)
		} else {
			pcols = append(pcols, i)
		}
	}
	if len(vcols) == 0 || len(pcols) == 0 {
		return nil, errors.New("want parameter columns, then value columns named METRIC_seedN")
	}
	t := &Table{grid: map[string][]float64{}, rows: map[string][]float64{}, mean: map[string]float64{}}
	t.Metric = head[vcols[0]][:strings.LastIndex(head[vcols[0]], "_seed")]
	t.Goal = tuner.Maximize
	if strings.HasSuffix(t.Metric, "mse") || strings.HasSuffix(t.Metric, "loss") {
		t.Goal = tuner.Minimize
	}
	var records [][]string
	distinct := make([]map[string]bool, len(pcols))
	for i := range distinct {
		distinct[i] = map[string]bool{}
	}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(rec) <= pcols[len(pcols)-1] {
			return nil, fmt.Errorf("line %d has %d fields, too few for the header's parameters", line, len(rec))
		}
		records = append(records, rec)
		for i, c := range pcols {
			distinct[i][rec[c]] = true
		}
	}
	if len(records) == 0 {
		return nil, errors.New("no configurations")
	}
	for i, c := range pcols {
		t.Space.Params = append(t.Space.Params, column(head[c], distinct[i], t.grid))
	}
	for _, rec := range records {
		var vals []float64
		for _, c := range vcols {
			if c < len(rec) && rec[c] != "" {
				v, err := strconv.ParseFloat(rec[c], 64)
				if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("%s: %q is not a number", head[c], rec[c])
				}
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			continue
		}
		k := t.rowKey(rec, pcols)
		t.rows[k] = vals
		s := 0.0
		for _, v := range vals {
			s += v
		}
		t.mean[k] = s / float64(len(vals))
	}
	first := true
	for _, m := range t.mean {
		if first || t.better(m, t.best) {
			t.best, first = m, false
		}
	}
	return t, nil
}

// checkHeader refuses empty or repeated column names.
func checkHeader(head []string) error {
	seen := map[string]bool{}
	for i, h := range head {
		switch {
		case strings.TrimSpace(h) == "":
			return fmt.Errorf("column %d of the header has no name", i+1)
		case seen[h]:
			return fmt.Errorf("the header names column %q twice", h)
		}
		seen[h] = true
	}
	return nil
}

// column builds a parameter from a column's distinct values: numbers
// whose sorted values grow by a factor above 1.5 each step are log-scaled,
// other numbers linear (int when all are whole), text is a choice.
func column(name string, distinct map[string]bool, grid map[string][]float64) tuner.Param {
	var nums []float64
	var texts []string
	for s := range distinct {
		texts = append(texts, s)
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			nums = append(nums, v)
		}
	}
	if len(nums) < len(texts) {
		sort.Strings(texts)
		return tuner.Param{Name: name, Kind: tuner.Choice, Choices: texts}
	}
	sort.Float64s(nums)
	log := len(nums) > 2 && nums[0] > 0
	integer := true
	for i, v := range nums {
		if i > 0 && !(v/nums[i-1] > 1.5) {
			log = false
		}
		if v != math.Trunc(v) {
			integer = false
		}
	}
	grid[name] = nums
	p := tuner.Param{Name: name, Kind: tuner.Float, Min: nums[0], Max: nums[len(nums)-1], Log: log}
	if integer {
		p.Kind = tuner.Int
	}
	return p
}

func (t *Table) rowKey(rec []string, pcols []int) string {
	parts := make([]string, len(pcols))
	for i, c := range pcols {
		p := t.Space.Params[i]
		if p.Kind == tuner.Choice {
			parts[i] = rec[c]
			continue
		}
		v, _ := strconv.ParseFloat(rec[c], 64)
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, "|")
}

func (t *Table) better(a, b float64) bool {
	if t.Goal == tuner.Minimize {
		return a < b
	}
	return a > b
}

// Configurations is the number of configurations with a result.
func (t *Table) Configurations() int { return len(t.rows) }

// Best is the best mean over seeds in the table.
func (t *Table) Best() float64 { return t.best }

// Snap returns the table's configuration nearest to v, each number
// snapped to its nearest grid value (in log space for a log parameter),
// and the key of its row.
func (t *Table) Snap(v tuner.Values) (tuner.Values, string) {
	out := make(tuner.Values, len(v))
	parts := make([]string, len(t.Space.Params))
	for i, p := range t.Space.Params {
		x := v[p.Name]
		if p.Kind == tuner.Choice {
			out[p.Name] = x
			parts[i], _ = x.(string)
			continue
		}
		var f float64
		switch x := x.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		}
		g := t.grid[p.Name]
		dist := func(a float64) float64 {
			if p.Log {
				return math.Abs(math.Log(a) - math.Log(f))
			}
			return math.Abs(a - f)
		}
		bestV := g[0]
		for _, c := range g[1:] {
			if dist(c) < dist(bestV) {
				bestV = c
			}
		}
		if p.Kind == tuner.Int {
			out[p.Name] = int64(bestV)
		} else {
			out[p.Name] = bestV
		}
		parts[i] = strconv.FormatFloat(bestV, 'g', -1, 64)
	}
	return out, strings.Join(parts, "|")
}

// Seeds returns the per-seed values of a configuration's row.
func (t *Table) Seeds(key string) ([]float64, bool) {
	v, ok := t.rows[key]
	return v, ok
}

// Mean returns the mean over seeds of a configuration's row.
func (t *Table) Mean(key string) (float64, bool) {
	v, ok := t.mean[key]
	return v, ok
}
