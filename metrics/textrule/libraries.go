package textrule

import (
	"bytes"
	"regexp"
	"strings"
)

// This file holds the presets of training libraries' own output, each as
// the library prints it (testdata/formats in the metrics package has one
// recorded output of each).

// python reads a line that is one Python dict (PyDict): the step is its
// first member named as one of StepNames with a whole value, else a
// counter.
func (m *Matcher) python(seg []byte, _ int64) (Record, bool) {
	if len(seg) == 0 || seg[0] != '{' {
		return Record{}, false
	}
	vals, ok := PyDict(seg, m.vals)
	m.vals = vals
	if !ok || len(vals) == 0 {
		return Record{}, false
	}
	best, at := len(StepNames), -1
	for i, kv := range vals {
		if rank, isStep := isStepName(kv.Key); isStep && rank < best && kv.Value >= 0 && kv.Value < 1<<63 && kv.Value == float64(int64(kv.Value)) {
			best, at = rank, i
		}
	}
	rec := Record{}
	if at >= 0 {
		rec.Step, rec.StepSource = int64(vals[at].Value), vals[at].Key
		m.vals = append(vals[:at], vals[at+1:]...)
	} else {
		rec.Step, rec.StepSource = m.counter(), StepCounter
	}
	rec.Values = m.vals
	return rec, len(m.vals) > 0
}

// hfTrainer reads the dicts Hugging Face's Trainer prints at each logging
// step (ProgressCallback.on_log writes str(logs) on stdout):
//
//	{'loss': 0.6931, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.01}
//	{'eval_loss': 0.65, 'eval_runtime': 0.5, 'eval_samples_per_second': 200.0, 'epoch': 1.0}
//	{'train_runtime': 12.3, 'train_samples_per_second': 81.2, 'train_loss': 0.61, 'epoch': 3.0}
//
// Every dict has 'epoch' (a fraction: a value, never the step). The
// printed dicts carry no global step, so the step is the logging event:
// it advances when a dict repeats a key of the event so far (the next
// training log), so that an evaluation and the final summary share the
// step of the training log they follow. trainer_state.json's log_history,
// read beside it, has the global step.
func (m *Matcher) hfTrainer(seg []byte, _ int64) (Record, bool) {
	if len(seg) == 0 || seg[0] != '{' {
		return Record{}, false
	}
	vals, ok := PyDict(seg, m.vals)
	m.vals = vals
	if !ok || len(vals) < 2 {
		return Record{}, false
	}
	hasEpoch := false
	for _, kv := range vals {
		if kv.Key == "epoch" {
			hasEpoch = true
		}
	}
	if !hasEpoch {
		return Record{}, false
	}
	repeat := false
	for _, kv := range vals {
		if kv.Key == "epoch" {
			continue
		}
		for _, k := range m.st.Keys {
			if k == kv.Key {
				repeat = true
			}
		}
	}
	if repeat || m.st.Count == 0 { // a new logging event
		m.st.Count++
		m.st.Keys = m.st.Keys[:0]
	}
	for _, kv := range vals {
		if kv.Key != "epoch" && len(m.st.Keys) < 64 {
			m.st.Keys = append(m.st.Keys, kv.Key)
		}
	}
	return Record{Step: m.st.Count - 1, StepSource: "log", Values: vals}, true
}

// gbdt reads the evaluation lines of gradient-boosting libraries, whose
// bracketed round is the step:
//
//	[3]	train-logloss:0.57000	eval-logloss:0.67000        (XGBoost)
//	[3]	train-rmse:0.35+0.01	test-rmse:0.37+0.02          (xgboost.cv: mean+std)
//	[3]	training's binary_logloss: 0.57	valid_1's auc: 0.91 (LightGBM)
//	3:	learn: 0.5731	test: 0.6710	best: 0.6710 (3)	total: 5ms	remaining: 1s (CatBoost)
//
// Keys are the data set and the metric joined by '-' (train-logloss,
// valid_1-auc; CatBoost's learn, test, best); a "+std" becomes a second
// value, KEY-std.
func (m *Matcher) gbdt(seg []byte, _ int64) (Record, bool) {
	if len(seg) == 0 || !(seg[0] == '[' || isDigit(seg[0])) || bytes.IndexByte(seg, '\t') < 0 {
		return Record{}, false // what gbdtRe needs, without it
	}
	mm := gbdtRe.FindSubmatch(seg)
	if mm == nil {
		return Record{}, false
	}
	round := mm[1]
	if len(round) == 0 {
		round = mm[2]
	}
	step, ok := parseStep(round)
	if !ok {
		return Record{}, false
	}
	for _, cell := range bytes.Split(mm[3], []byte("\t")) {
		cell = bytes.TrimSpace(cell)
		if len(cell) == 0 {
			continue
		}
		name, val, ok := cutLast(cell, ':')
		if !ok {
			continue
		}
		key := string(bytes.TrimSpace(name))
		if d, metric, ok := bytes.Cut(name, []byte("'s ")); ok { // LightGBM
			key = string(d) + "-" + string(bytes.TrimSpace(metric))
		}
		val = bytes.TrimSpace(val)
		if sp := bytes.IndexByte(val, ' '); sp > 0 { // CatBoost's "best: 0.67 (3)"
			val = val[:sp]
		}
		mean, std, hasStd := bytes.Cut(val[min(1, len(val)):], []byte("+"))
		if hasStd {
			mean = val[:1+len(mean)]
		} else {
			mean = val
		}
		if strings.HasSuffix(key, "total") || strings.HasSuffix(key, "remaining") || key == "" {
			continue
		}
		if v, ok := ParseNumber(mean); ok {
			m.vals = append(m.vals, KV{key, v})
			if hasStd {
				if s, ok := ParseNumber(std); ok {
					m.vals = append(m.vals, KV{key + "-std", s})
				}
			}
		}
	}
	return Record{Step: step, StepSource: "round", Values: m.vals}, len(m.vals) > 0
}

var gbdtRe = regexp.MustCompile(`^(?:\[([0-9]+)\]|([0-9]+):)\t(.*[^\s:]:\s*[-+]?(?:[0-9.]|nan|inf).*)$`)

// cutLast cuts b around the last sep.
func cutLast(b []byte, sep byte) (before, after []byte, found bool) {
	i := bytes.LastIndexByte(b, sep)
	if i < 0 {
		return b, nil, false
	}
	return b[:i], b[i+1:], true
}

// sklearn reads scikit-learn's verbose output:
//
//	Iteration 3, loss = 0.76666667           (MLPClassifier, MLPRegressor)
//	Validation score: 0.912000               (the same, with early_stopping)
//	Iteration 2, inertia 95.333.             (KMeans)
//	-- Epoch 3                               (SGDClassifier, Perceptron, ...)
//	Norm: 6.88, NNZs: 4, Bias: -0.355, T: 150, Avg. loss: 0.210
//	      Iter       Train Loss      OOB Improve   Remaining Time   (GradientBoosting*)
//	         1           1.1507           0.0123            0.12s
//
// The step is the iteration (epoch); keys are sklearn's names in
// snake_case (loss, validation_score, inertia, norm, nnzs, bias, t,
// avg_loss, train_loss, oob_improve).
func (m *Matcher) sklearn(seg []byte, _ int64) (Record, bool) {
	if mm := skIterRe.FindSubmatch(seg); mm != nil {
		step, ok := parseStep(mm[1])
		v, okv := ParseNumber(mm[3])
		if !ok || !okv {
			return Record{}, false
		}
		m.st.Epoch = step
		m.vals = append(m.vals, KV{snake(string(mm[2])), v})
		return Record{Step: step, StepSource: "iteration", Values: m.vals}, true
	}
	if mm := skValidRe.FindSubmatch(seg); mm != nil {
		if v, ok := ParseNumber(mm[1]); ok {
			m.vals = append(m.vals, KV{"validation_score", v})
			return Record{Step: m.st.Epoch, StepSource: "iteration", Values: m.vals}, true
		}
	}
	if mm := skEpochRe.FindSubmatch(seg); mm != nil {
		m.st.Epoch, _ = parseStep(mm[1])
		return Record{}, false
	}
	if bytes.HasPrefix(seg, []byte("Norm: ")) {
		for _, part := range bytes.Split(seg, []byte(", ")) {
			k, v, ok := bytes.Cut(part, []byte(": "))
			if !ok {
				continue
			}
			if f, ok := ParseNumber(v); ok {
				m.vals = append(m.vals, KV{snake(string(k)), f})
			}
		}
		return Record{Step: m.st.Epoch, StepSource: "epoch", Values: m.vals}, len(m.vals) > 0
	}
	seg = bytes.TrimSpace(seg)
	if skGBHeadRe.Match(seg) {
		m.st.Keys = m.st.Keys[:0]
		for _, name := range skGBColRe.FindAll(seg, -1) {
			m.st.Keys = append(m.st.Keys, snake(string(name)))
		}
		return Record{}, false
	}
	if len(m.st.Keys) > 1 && m.st.Keys[0] == "iter" {
		cells := bytes.Fields(seg)
		if len(cells) != len(m.st.Keys) {
			return Record{}, false
		}
		step, ok := parseStep(cells[0])
		if !ok {
			return Record{}, false
		}
		for i, c := range cells[1:] {
			if m.st.Keys[i+1] == "remaining_time" {
				continue
			}
			if v, ok := ParseNumber(c); ok {
				m.vals = append(m.vals, KV{m.st.Keys[i+1], v})
			}
		}
		return Record{Step: step, StepSource: "iter", Values: m.vals}, len(m.vals) > 0
	}
	return Record{}, false
}

var (
	skIterRe   = regexp.MustCompile(`^Iteration ([0-9]+), ([a-z][a-z ]*?)(?: =|:)? ([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|nan|inf))\.?$`)
	skValidRe  = regexp.MustCompile(`^Validation score: ([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|nan)$`)
	skEpochRe  = regexp.MustCompile(`^-- Epoch ([0-9]+)$`)
	skGBHeadRe = regexp.MustCompile(`^Iter\s+Train Loss(?:\s+OOB Improve)?\s+Remaining Time$`)
	skGBColRe  = regexp.MustCompile(`Iter|Train Loss|OOB Improve|Remaining Time`)
)

// snake writes a label as a key: "Avg. loss" → avg_loss.
func snake(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.NewReplacer(". ", "_", " ", "_", ".", "").Replace(s)
	return s
}

// skorch reads skorch's epoch table (its PrintLog callback, a tabulate
// table whose best values are coloured):
//
//	  epoch    train_loss    valid_acc    valid_loss  cp     dur
//	-------  ------------  -----------  ------------  ----  ------
//	      1        0.6905       0.6100        0.6788     +  0.0321
//
// The header is the line above the dashes; each column spans its run of
// dashes, so empty cells (cp) are read as empty. Lines reach the preset
// with their leading spaces removed, so cells are found from the line's
// end: tabulate pads every row to the table's width. The step is the
// epoch.
func (m *Matcher) skorch(seg []byte, _ int64) (Record, bool) {
	if skorchRuleRe.Match(seg) && len(m.prev) > 0 {
		m.st.Keys, m.st.Spans, m.st.Total = m.st.Keys[:0], m.st.Spans[:0], int64(len(seg))
		for _, loc := range skorchDashRe.FindAllIndex(seg, -1) {
			m.st.Keys = append(m.st.Keys, string(bytes.TrimSpace(cell(m.prev, loc[0], loc[1], len(seg)))))
			m.st.Spans = append(m.st.Spans, loc[0], loc[1])
		}
		if len(m.st.Keys) < 2 || m.st.Keys[0] != "epoch" {
			m.st.Keys, m.st.Spans, m.st.Total = nil, nil, 0
		}
		return Record{}, false
	}
	m.prev = append(m.prev[:0], seg...)
	if len(m.st.Keys) == 0 {
		return Record{}, false
	}
	var step int64 = -1
	for i, key := range m.st.Keys {
		c := bytes.TrimSpace(cell(seg, m.st.Spans[2*i], m.st.Spans[2*i+1], int(m.st.Total)))
		if i == 0 {
			s, ok := parseStep(c)
			if !ok {
				return Record{}, false
			}
			step = s
			continue
		}
		if v, ok := ParseNumber(c); ok {
			m.vals = append(m.vals, KV{key, v})
		}
	}
	return Record{Step: step, StepSource: "epoch", Values: m.vals}, step >= 0 && len(m.vals) > 0
}

// cell is the part of line under the columns lo..hi of a table width
// wide, line being aligned on the table's right edge.
func cell(line []byte, lo, hi, width int) []byte {
	shift := width - len(line)
	lo, hi = max(lo-shift, 0), min(hi-shift, len(line))
	if lo >= hi {
		return nil
	}
	return line[lo:hi]
}

var (
	skorchRuleRe = regexp.MustCompile(`^-+(?:  -+)+$`)
	skorchDashRe = regexp.MustCompile(`-+`)
)

// fairseq reads fairseq's progress lines (its "simple" and "none" log
// formats), with or without the logging prefix of newer versions:
//
//	2020-11-18 10:20:22 | INFO | train_inner | epoch 001:    100 / 1102 loss=9.932, ppl=634.84, num_updates=100, lr=2.5e-05
//	2020-11-18 10:23:40 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.601 | ppl 221.3 | num_updates 1102
//	2020-11-18 10:23:48 | INFO | train | epoch 001 | loss 10.654 | ppl 1133.78 | num_updates 1102 | lr 0.000275
//	| epoch 001:    100 / 1102 loss=9.932, nll_loss=9.31, num_updates=100      (before 0.10)
//
// The step is num_updates, fairseq's own; without it (a line of a
// version that omits it) the epoch's updates so far. Values of a
// validation summary are named SUBSET/NAME (valid/loss), of an epoch's
// training summary train/NAME, as fairseq's TensorBoard logs name them;
// the inner lines' keep fairseq's names.
func (m *Matcher) fairseq(seg []byte, _ int64) (Record, bool) {
	if !bytes.Contains(seg, []byte("epoch ")) {
		return Record{}, false
	}
	seg = bytes.TrimPrefix(seg, []byte("| "))
	tag := ""
	if t, rest, ok := bytes.Cut(seg, []byte(" | ")); ok && fairseqTagRe.Match(t) {
		tag, seg = string(t), rest
	}
	if mm := fairseqInnerRe.FindSubmatch(seg); mm != nil {
		var step int64 = -1
		for _, part := range bytes.Split(mm[4], []byte(", ")) {
			k, v, ok := bytes.Cut(bytes.TrimSpace(part), []byte("="))
			if !ok {
				continue
			}
			f, ok := ParseNumber(v)
			if !ok {
				continue
			}
			if string(k) == "num_updates" {
				step, _ = parseStep(v)
				continue
			}
			m.vals = append(m.vals, KV{string(k), f})
		}
		source := "num_updates"
		if step < 0 {
			step, _ = parseStep(mm[2])
			source = "update"
		}
		return Record{Step: step, StepSource: source, Values: m.vals}, len(m.vals) > 0
	}
	if !bytes.HasPrefix(seg, []byte("epoch ")) {
		return Record{}, false
	}
	prefix := "train/"
	if tag != "" && tag != "train" {
		prefix = tag + "/"
	}
	var step int64 = -1
	for _, cell := range bytes.Split(seg, []byte(" | ")) {
		cell = bytes.TrimSpace(cell)
		if mm := fairseqSubsetRe.FindSubmatch(cell); mm != nil {
			prefix = string(mm[1]) + "/"
			continue
		}
		name, val, ok := cutLast(cell, ' ')
		if !ok || bytes.Equal(name, []byte("epoch")) {
			continue
		}
		f, ok := ParseNumber(val)
		if !ok {
			continue
		}
		if string(name) == "num_updates" {
			step, _ = parseStep(val)
			continue
		}
		m.vals = append(m.vals, KV{prefix + string(name), f})
	}
	if step < 0 {
		return Record{}, false
	}
	return Record{Step: step, StepSource: "num_updates", Values: m.vals}, len(m.vals) > 0
}

var (
	fairseqTagRe    = regexp.MustCompile(`^[a-z_]+$`)
	fairseqInnerRe  = regexp.MustCompile(`^epoch ([0-9]+):\s+([0-9]+)\s*/\s*([0-9]+)\s+(.*=.*)$`)
	fairseqSubsetRe = regexp.MustCompile(`^valid on '([^']+)' subset$`)
)

// caffe reads Caffe's solver log (glog lines, their prefix stripped):
//
//	I0402 10:20:02.456789 12345 solver.cpp:218] Iteration 100 (90.1 iter/s, 1.11s/100 iters), loss = 0.2153
//	I0402 10:20:02.456790 12345 solver.cpp:237]     Train net output #0: loss = 0.2153 (* 1 = 0.2153 loss)
//	I0402 10:20:02.456791 12345 sgd_solver.cpp:105] Iteration 100, lr = 0.00992565
//	I0402 10:20:04.678901 12345 solver.cpp:330] Iteration 200, Testing net (#0)
//	I0402 10:20:05.789012 12345 solver.cpp:397]     Test net output #0: accuracy = 0.9712
//
// The step is the iteration the solver is at; the smoothed loss and lr
// keep their names, the nets' outputs are train_NAME and test_NAME.
func (m *Matcher) caffe(seg []byte, _ int64) (Record, bool) {
	seg = bytes.TrimSpace(seg)
	if !bytes.HasPrefix(seg, []byte("Iteration ")) && !bytes.HasPrefix(seg, []byte("Train net output")) && !bytes.HasPrefix(seg, []byte("Test net output")) {
		return Record{}, false
	}
	if mm := caffeIterRe.FindSubmatch(seg); mm != nil {
		step, ok := parseStep(mm[1])
		if !ok {
			return Record{}, false
		}
		m.st.Count = step
		name, val := mm[2], mm[3]
		if len(name) == 0 {
			name, val = mm[4], mm[5]
		}
		if len(name) == 0 { // "Testing net"
			return Record{}, false
		}
		if v, ok := ParseNumber(val); ok {
			m.vals = append(m.vals, KV{string(name), v})
		}
		return Record{Step: step, StepSource: "iteration", Values: m.vals}, len(m.vals) > 0
	}
	if mm := caffeOutputRe.FindSubmatch(seg); mm != nil {
		if v, ok := ParseNumber(mm[3]); ok {
			m.vals = append(m.vals, KV{strings.ToLower(string(mm[1])) + "_" + string(mm[2]), v})
		}
		return Record{Step: m.st.Count, StepSource: "iteration", Values: m.vals}, len(m.vals) > 0
	}
	return Record{}, false
}

var (
	caffeIterRe   = regexp.MustCompile(`^Iteration ([0-9]+)(?: \([^)]*iter/s[^)]*\), (loss) = ([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf)|, (lr) = ([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)|, Testing net \(#[0-9]+\))$`)
	caffeOutputRe = regexp.MustCompile(`^(Train|Test) net output #[0-9]+: (\S+) = ([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf)(?: \(.*\))?$`)
)
