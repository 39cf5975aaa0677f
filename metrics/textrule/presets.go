package textrule

import (
	"bytes"
	"regexp"
	"strings"
)

// keyValue reads key=value and key: value pairs (the convention of Katib's
// and Guild's collectors): a key is a letter or '_' followed by letters,
// digits, '_', '.', '-' or '/'; a value is a number; pairs are separated by
// spaces, commas, semicolons or pipes, and a value may end with '%'. The
// step is the first of StepNames among the keys (matched in any case), else
// a counter.
func (m *Matcher) keyValue(seg []byte, _ int64) (Record, bool) {
	if !hasPair(seg) { // what kvRe needs, found without it (most log lines)
		return Record{}, false
	}
	rec := Record{}
	best := len(StepNames)
	for _, loc := range kvRe.FindAllSubmatchIndex(seg, -1) {
		end := loc[1]
		if end < len(seg) && !isValueEnd(seg[end]) {
			continue
		}
		key := string(seg[loc[2]:loc[3]])
		v, ok := ParseNumber(seg[loc[4]:loc[5]])
		if !ok {
			continue
		}
		if rank, isStep := isStepName(key); isStep {
			if s, ok := parseStep(seg[loc[4]:loc[5]]); ok && rank < best {
				if best < len(StepNames) {
					// The step taken so far is an ordinary value after all.
					m.vals = append(m.vals, KV{rec.StepSource, float64(rec.Step)})
				}
				best, rec.Step, rec.StepSource = rank, s, key
				continue
			}
		}
		m.vals = append(m.vals, KV{key, v})
	}
	if len(m.vals) == 0 {
		return Record{}, false
	}
	if best == len(StepNames) {
		rec.Step, rec.StepSource = m.counter(), StepCounter
	}
	rec.Values = m.vals
	return rec, true
}

var kvRe = regexp.MustCompile(`(?:^|[\s,;|(\[{])([A-Za-z_][A-Za-z0-9_./-]*)\s*(?:=|:)\s*([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|(?i:[-+]?(?:nan|inf(?:inity)?)))`)

// hasPair reports whether seg has an '=' or ':' followed (after spaces)
// by what may start a number: a line without one has no pair.
func hasPair(seg []byte) bool {
	for i, c := range seg {
		if c != '=' && c != ':' {
			continue
		}
		j := i + 1
		for j < len(seg) && (seg[j] == ' ' || seg[j] == '\t' || seg[j] == '\v' || seg[j] == '\f' || seg[j] == '\r' || seg[j] == '\n') {
			j++
		}
		if j < len(seg) && strings.IndexByte("-+0123456789.nNiI", seg[j]) >= 0 {
			return true
		}
	}
	return false
}

func isValueEnd(c byte) bool {
	switch c {
	case ' ', '\t', ',', ';', '|', ')', ']', '}', '%':
		return true
	}
	return false
}

// pytorchExamples reads the tables pytorch/examples print, e.g.
//
//	| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.00 | loss  7.63 | ppl  2066.57
//	| end of epoch   1 | time: 135.31s | valid loss  5.62 | valid ppl   276.53
//	| End of training | test loss  5.54 | test ppl   254.42
//
// Each cell between '|' is a name and a number (with an optional unit
// such as "s"); spaces in a name become '_' ("valid loss" → valid_loss).
// The step counts batches over the whole run: (epoch-1)·batches + batch
// for a batch line, epoch·batches at the end of an epoch, the last step
// for a line with neither (the final test line).
func (m *Matcher) pytorchExamples(seg []byte, _ int64) (Record, bool) {
	if bytes.HasPrefix(seg, []byte("Train Epoch: ")) || bytes.HasPrefix(seg, []byte("Test set: ")) {
		return m.pytorchMNIST(seg)
	}
	if len(seg) == 0 || seg[0] != '|' {
		return Record{}, false
	}
	var (
		epoch, batch int64 = -1, -1
		endOfEpoch   bool
	)
	for _, cell := range bytes.Split(seg[1:], []byte("|")) {
		cell = bytes.TrimSpace(cell)
		if len(cell) == 0 {
			continue
		}
		if mm := batchesRe.FindSubmatch(cell); mm != nil {
			b, _ := parseStep(mm[1])
			t, _ := parseStep(mm[2])
			batch, m.st.Total = b, t
			continue
		}
		mm := cellRe.FindSubmatch(cell)
		if mm == nil {
			continue
		}
		name := strings.ToLower(strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimSpace(string(mm[1])), ":")), " "))
		v, ok := ParseNumber(mm[2])
		if !ok {
			continue
		}
		switch name {
		case "epoch":
			epoch, _ = parseStep(mm[2])
			continue
		case "end of epoch":
			epoch, _ = parseStep(mm[2])
			endOfEpoch = true
			continue
		}
		m.vals = append(m.vals, KV{strings.ReplaceAll(name, " ", "_"), v})
	}
	if len(m.vals) == 0 {
		return Record{}, false
	}
	rec := Record{StepSource: "epoch/batch", Values: m.vals}
	switch {
	case epoch >= 1 && batch >= 0 && m.st.Total > 0:
		rec.Step = (epoch-1)*m.st.Total + batch
	case epoch >= 0 && endOfEpoch && m.st.Total > 0:
		rec.Step = epoch * m.st.Total
	case epoch >= 0:
		rec.Step, rec.StepSource = epoch, "epoch"
	case batch >= 0:
		rec.Step, rec.StepSource = batch, "batch"
	default:
		rec.Step = m.st.Count // after the last step: the final test line
	}
	m.st.Count = max(m.st.Count, rec.Step)
	m.st.Epoch = max(m.st.Epoch, epoch)
	return rec, true
}

// pytorchMNIST reads the lines of pytorch/examples' mnist (and the
// examples written after it):
//
//	Train Epoch: 1 [640/60000 (1%)]	Loss: 0.512345
//	Test set: Average loss: 0.0452, Accuracy: 9850/10000 (98%)
//
// The step counts samples over the whole run: (epoch-1)·total + samples
// for a training line, epoch·total for the test after it; the test's
// accuracy is the fraction correct (test_loss, test_accuracy).
func (m *Matcher) pytorchMNIST(seg []byte) (Record, bool) {
	if mm := mnistTrainRe.FindSubmatch(seg); mm != nil {
		epoch, _ := parseStep(mm[1])
		done, _ := parseStep(mm[2])
		total, _ := parseStep(mm[3])
		v, ok := ParseNumber(mm[4])
		if !ok || epoch < 1 || total <= 0 {
			return Record{}, false
		}
		m.st.Epoch, m.st.Total = epoch, total
		m.vals = append(m.vals, KV{"loss", v})
		return Record{Step: (epoch-1)*total + done, StepSource: "epoch/sample", Values: m.vals}, true
	}
	mm := mnistTestRe.FindSubmatch(seg)
	if mm == nil {
		return Record{}, false
	}
	if v, ok := ParseNumber(mm[1]); ok {
		m.vals = append(m.vals, KV{"test_loss", v})
	}
	correct, ok1 := ParseNumber(mm[2])
	n, ok2 := ParseNumber(mm[3])
	if ok1 && ok2 && n > 0 {
		m.vals = append(m.vals, KV{"test_accuracy", correct / n})
	}
	return Record{Step: m.st.Epoch * m.st.Total, StepSource: "epoch/sample", Values: m.vals}, len(m.vals) > 0
}

var (
	mnistTrainRe = regexp.MustCompile(`^Train Epoch: ([0-9]+) \[([0-9]+)/([0-9]+) \([0-9.]+%\)\]\s+Loss: ([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf)$`)
	mnistTestRe  = regexp.MustCompile(`^Test set: Average loss: ([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|nan|inf), Accuracy: ([0-9]+)/([0-9]+) \([0-9.]+%\)$`)
)

var (
	batchesRe = regexp.MustCompile(`^([0-9]+)\s*/\s*([0-9]+)\s+batch(?:es)?$`)
	cellRe    = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_./ -]*?:?)\s+([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|(?i:nan|inf))\s*[A-Za-z%]{0,3}$`)
)

// keras reads Keras' progress output: "Epoch 3/10" lines set the epoch and
// the progress lines carry " - name: value" pairs:
//
//	Epoch 1/5
//	1875/1875 [==============================] - 4s 2ms/step - loss: 0.2983 - accuracy: 0.9134
//	1875/1875 ━━━━━━━━━━━━━━━━━━━━ 3s 1ms/step - accuracy: 0.8803 - loss: 0.4211 - val_accuracy: 0.9565
//
// The step is (epoch-1)·batches + batch. Keras shows the mean over the
// epoch so far, which restarts every epoch (the sentinel recognises such
// restarts in the values themselves).
func (m *Matcher) keras(seg []byte, _ int64) (Record, bool) {
	if mm := kerasEpochRe.FindSubmatch(seg); mm != nil {
		m.st.Epoch, _ = parseStep(mm[1])
		return Record{}, false
	}
	mm := kerasProgressRe.FindSubmatch(seg)
	if mm == nil {
		return Record{}, false
	}
	batch, _ := parseStep(mm[1])
	total, known := parseStep(mm[2])
	for _, part := range bytes.Split(mm[3], []byte(" - ")) {
		kv := kerasPairRe.FindSubmatch(bytes.TrimSpace(part))
		if kv == nil {
			continue
		}
		if v, ok := ParseNumber(kv[2]); ok {
			m.vals = append(m.vals, KV{string(kv[1]), v})
		}
	}
	if len(m.vals) == 0 {
		return Record{}, false
	}
	if known && total > 0 {
		m.st.Total = total
	}
	rec := Record{Step: batch, StepSource: "batch", Values: m.vals}
	if m.st.Epoch >= 1 && m.st.Total > 0 {
		rec.Step, rec.StepSource = (m.st.Epoch-1)*m.st.Total+batch, "epoch/batch"
	}
	return rec, true
}

var (
	kerasEpochRe    = regexp.MustCompile(`^Epoch ([0-9]+)/([0-9]+)$`)
	kerasProgressRe = regexp.MustCompile(`^([0-9]+)/([0-9]+|Unknown)\b(.* - [A-Za-z_][A-Za-z0-9_./-]*: \S+.*)$`)
	kerasPairRe     = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_./-]*): (\S+)$`)
)

// tqdm reads the postfix of a tqdm progress bar (set_postfix, or Lightning's
// bar), e.g.
//
//	Epoch 3:  45%|████▌     | 45/100 [00:01<00:02, 30.12it/s, loss=0.123, v_num=0]
//
// The values are the name=value pairs inside the trailing brackets; the
// step is the bar's count, plus epoch·total when the description names an
// epoch ("Epoch 3").
func (m *Matcher) tqdm(seg []byte, _ int64) (Record, bool) {
	// What tqdmRe needs, found without it: a bracket at the end, a rate.
	if t := bytes.TrimRight(seg, " \t\v\f\r\n"); len(t) == 0 || t[len(t)-1] != ']' ||
		!(bytes.Contains(t, []byte("it/s")) || bytes.Contains(t, []byte("s/it")) || bytes.IndexByte(t, '?') >= 0) {
		return Record{}, false
	}
	mm := tqdmRe.FindSubmatch(seg)
	if mm == nil {
		return Record{}, false
	}
	for _, part := range bytes.Split(mm[4], []byte(",")) {
		k, v, ok := bytes.Cut(bytes.TrimSpace(part), []byte("="))
		if !ok || len(k) == 0 {
			continue
		}
		if f, ok := ParseNumber(v); ok {
			m.vals = append(m.vals, KV{string(k), f})
		}
	}
	if len(m.vals) == 0 {
		return Record{}, false
	}
	n, _ := parseStep(mm[2])
	rec := Record{Step: n, StepSource: "counter", Values: m.vals}
	total, known := parseStep(mm[3])
	if e := tqdmEpochRe.FindSubmatch(mm[1]); e != nil && known && total > 0 {
		ep, _ := parseStep(e[1])
		rec.Step, rec.StepSource = ep*total+n, "epoch/batch"
	}
	return rec, true
}

var (
	tqdmRe      = regexp.MustCompile(`^(.*?)(?:[0-9]+%\|[^|]*\|)?\s*([0-9]+)(?:/([0-9]+|\?))?(?:it)?\s*\[[^\]]*?,\s*[^,\]]*?(?:it/s|s/it|\?)\s*,\s*([^\]]*)\]\s*$`)
	tqdmEpochRe = regexp.MustCompile(`(?i)\bepoch\s*([0-9]+)\b`)
)
