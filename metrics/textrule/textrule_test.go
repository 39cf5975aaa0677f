package textrule

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func segments(line string) []string {
	var out []string
	var scratch []byte
	Segments([]byte(line), &scratch, func(seg []byte) { out = append(out, string(seg)) })
	return out
}

func TestSegments(t *testing.T) {
	tests := []struct {
		name, line string
		want       []string
	}{
		{"plain", "loss=0.5", []string{"loss=0.5"}},
		{"tqdm redraws then the real line", "  0%|          | 0/3 [00:00<?, ?it/s]\r 33%|###3      | 1/3\r{\"step\": 1}", []string{"0%|          | 0/3 [00:00<?, ?it/s]", "33%|###3      | 1/3", `{"step": 1}`}},
		{"colours", "\x1b[32mINFO\x1b[0m {\"step\": 2}", []string{`INFO {"step": 2}`}},
		{"clear line", "\r\x1b[K{\"step\": 3}", []string{`{"step": 3}`}},
		{"osc title", "\x1b]0;title\x07loss=1", []string{"loss=1"}},
		{"blank segments dropped", "\r \r\r", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, segments(tt.line)) })
	}
}

func TestStripLogPrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{`INFO:root:{"step": 1}`, `{"step": 1}`},
		{`WARNING:__main__:loss=0.5`, `loss=0.5`},
		{`2024-05-01 12:00:00,123 - root - INFO - {"step": 1}`, `{"step": 1}`},
		{`2024-05-01 12:00:00,123 INFO {"step": 1}`, `{"step": 1}`},
		{`[2024-05-01 12:00:00] INFO: {"step": 1}`, `{"step": 1}`},
		{`[2024-05-01 12:00:00,001][__main__][INFO] - {"step": 1}`, `{"step": 1}`},
		{`2024-05-01T12:00:00.123Z {"step": 1}`, `{"step": 1}`},
		{`I0501 12:00:00.123456 140234 train.py:42] {"step": 1}`, `{"step": 1}`},
		{`[INFO] epoch 1 loss=0.5`, `epoch 1 loss=0.5`},
		{`12:00:01 | INFO | loss: 0.5`, `loss: 0.5`},
		// No level or time: nothing is cut.
		{`epoch: 3 loss=0.2`, `epoch: 3 loss=0.2`},
		{`metrics: {"step": 1}`, `metrics: {"step": 1}`},
		{`[rank0]: {"step": 1}`, `[rank0]: {"step": 1}`},
		{`information: 3`, `information: 3`},
		{`| epoch   1 |   200/ 2983 batches`, `| epoch   1 |   200/ 2983 batches`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(StripLogPrefix([]byte(tt.in))), tt.in)
	}
}

func match(t *testing.T, r Rule, lines ...string) []Record {
	t.Helper()
	m, err := Compile(r)
	require.NoError(t, err)
	var out []Record
	for i, l := range lines {
		for _, seg := range segments(l) {
			if rec, ok := m.Match(StripLogPrefix([]byte(seg)), int64(i+1)); ok {
				rec.Values = append([]KV(nil), rec.Values...)
				out = append(out, rec)
			}
		}
	}
	return out
}

// The output of pytorch/examples' word_language_model/main.py is in
// testdata/word_language_model.stdout (see testdata/README.md).
func TestPresetPytorchExamples(t *testing.T) {
	recs := match(t, Rule{Preset: "pytorch-examples"},
		"Using device: cpu",
		"| epoch   1 |    50/  310 batches | lr 20.00 | ms/batch 734.66 | loss  7.99 | ppl  2949.68",
		"| epoch   1 |   100/  310 batches | lr 20.00 | ms/batch 643.92 | loss  7.21 | ppl  1348.36",
		"-----------------------------------------------------------------------------------------",
		"| end of epoch   1 | time: 231.87s | valid loss  6.53 | valid ppl   683.13",
		"| epoch   2 |    50/  310 batches | lr 20.00 | ms/batch 600.00 | loss  6.41 | ppl   607.55",
		"| End of training | test loss  6.40 | test ppl   601.85",
	)
	require.Len(t, recs, 5)
	assert.Equal(t, Record{Step: 50, StepSource: "epoch/batch", Values: []KV{{"lr", 20}, {"ms/batch", 734.66}, {"loss", 7.99}, {"ppl", 2949.68}}}, recs[0])
	assert.Equal(t, int64(100), recs[1].Step)
	assert.Equal(t, Record{Step: 310, StepSource: "epoch/batch", Values: []KV{{"time", 231.87}, {"valid_loss", 6.53}, {"valid_ppl", 683.13}}}, recs[2])
	assert.Equal(t, int64(360), recs[3].Step, "(2-1)*310 + 50")
	assert.Equal(t, Record{Step: 360, StepSource: "epoch/batch", Values: []KV{{"test_loss", 6.40}, {"test_ppl", 601.85}}}, recs[4])
}

func TestPresetKeyValue(t *testing.T) {
	recs := match(t, Rule{Preset: "key-value"},
		"accuracy=0.91 loss=0.25",
		"epoch: 3, loss: 0.2, val_loss: 0.31",
		"Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.300024",
		"INFO:root:step=7 lr=1e-3 acc=91.5%",
		"loss=nan",
		"12:30:45 nothing here",
		"see http://example.com:8080/x",
		"size=3x4",
	)
	require.Len(t, recs, 5)
	assert.Equal(t, Record{Step: 0, StepSource: "counter", Values: []KV{{"accuracy", 0.91}, {"loss", 0.25}}}, recs[0])
	assert.Equal(t, Record{Step: 3, StepSource: "epoch", Values: []KV{{"loss", 0.2}, {"val_loss", 0.31}}}, recs[1])
	assert.Equal(t, Record{Step: 1, StepSource: "Epoch", Values: []KV{{"Loss", 2.300024}}}, recs[2])
	assert.Equal(t, Record{Step: 7, StepSource: "step", Values: []KV{{"lr", 1e-3}, {"acc", 91.5}}}, recs[3])
	assert.True(t, math.IsNaN(recs[4].Values[0].Value))
	assert.Equal(t, int64(1), recs[4].Step, "the counter goes on")
}

func TestPresetKeras(t *testing.T) {
	recs := match(t, Rule{Preset: "keras"},
		"Epoch 1/2",
		"1875/1875 [==============================] - 4s 2ms/step - loss: 0.2983 - accuracy: 0.9134 - val_loss: 0.1448 - val_accuracy: 0.9567",
		"Epoch 2/2",
		"   1/1875 [..............................] - ETA: 2:05 - loss: 0.1277 - accuracy: 0.9688\r 938/1875 [==============>...............] - ETA: 1s - loss: 0.1480 - accuracy: 0.9562",
		"1875/1875 ━━━━━━━━━━━━━━━━━━━━ 3s 1ms/step - accuracy: 0.9588 - loss: 0.1397",
		"128/128 - 0s - loss: 2.9102 - accuracy: 0.1586 - 358ms/epoch - 3ms/step",
	)
	require.Len(t, recs, 5)
	assert.Equal(t, Record{Step: 1875, StepSource: "epoch/batch",
		Values: []KV{{"loss", 0.2983}, {"accuracy", 0.9134}, {"val_loss", 0.1448}, {"val_accuracy", 0.9567}}}, recs[0])
	assert.Equal(t, int64(1876), recs[1].Step)
	assert.Equal(t, int64(1875+938), recs[2].Step)
	assert.Equal(t, []KV{{"accuracy", 0.9588}, {"loss", 0.1397}}, recs[3].Values)
	assert.Equal(t, []KV{{"loss", 2.9102}, {"accuracy", 0.1586}}, recs[4].Values, "verbose=2 lines")
}

func TestPresetTqdm(t *testing.T) {
	recs := match(t, Rule{Preset: "tqdm"},
		"train:  45%|████▌     | 45/100 [00:01<00:02, 30.12it/s, loss=0.123, lr=0.001]",
		"Epoch 2:  10%|█         | 1/10 [00:00<00:00, 20.00it/s, v_num=0, train_loss=0.5]",
		"5it [00:00, 10.00it/s, loss=0.9]",
		" 45%|████▌     | 45/100 [00:01<00:02, 30.12it/s]",
	)
	require.Len(t, recs, 3)
	assert.Equal(t, Record{Step: 45, StepSource: "counter", Values: []KV{{"loss", 0.123}, {"lr", 0.001}}}, recs[0])
	assert.Equal(t, Record{Step: 21, StepSource: "epoch/batch", Values: []KV{{"v_num", 0}, {"train_loss", 0.5}}}, recs[1])
	assert.Equal(t, int64(5), recs[2].Step)
}

func TestPatterns(t *testing.T) {
	recs := match(t, Rule{Pattern: `epoch (?P<epoch>\d+) .*loss (?P<loss>[\d.]+)`}, "epoch 3 train loss 0.25", "epoch x loss 1")
	require.Len(t, recs, 1)
	assert.Equal(t, Record{Step: 3, StepSource: "epoch", Values: []KV{{"loss", 0.25}}}, recs[0])

	recs = match(t, Rule{Pattern: `acc=(?P<acc>\S+)`, Step: "line"}, "x", "acc=0.5", "acc=0.75")
	assert.Equal(t, []int64{2, 3}, []int64{recs[0].Step, recs[1].Step})
	recs = match(t, Rule{Pattern: `acc=(?<acc>\S+)`}, "acc=0.5", "acc=bad", "acc=0.75")
	require.Len(t, recs, 2)
	assert.Equal(t, []int64{0, 1}, []int64{recs[0].Step, recs[1].Step}, "a counter by default")
}

func TestCompileErrors(t *testing.T) {
	for _, tt := range []struct {
		r    Rule
		want string
	}{
		{Rule{}, "needs a preset"},
		{Rule{Preset: "pytorch"}, `unknown preset "pytorch": use one of key-value, pytorch-examples, keras, tqdm`},
		{Rule{Preset: "keras", Pattern: "x"}, "not both"},
		{Rule{Pattern: "(?P<loss"}, "not a valid regular expression"},
		{Rule{Pattern: `loss (\d+)`}, "no named group"},
		{Rule{Pattern: `(?P<epoch>\d+)`}, "captures only its step"},
		{Rule{Pattern: `(?P<loss>\d+)`, Step: "iter"}, `step "iter" is not a group`},
		{Rule{Preset: "keras", Step: "line"}, "chooses its own step"},
		{Rule{Preset: "keras", Stream: "stdin"}, "stream must be stdout, stderr or both"},
	} {
		err := tt.r.Validate()
		require.Error(t, err, tt.r)
		assert.Contains(t, err.Error(), tt.want)
	}
}

func TestStateRoundTrip(t *testing.T) {
	m, err := Compile(Rule{Preset: "keras"})
	require.NoError(t, err)
	_, _ = m.Match([]byte("Epoch 3/5"), 1)
	_, ok := m.Match([]byte("10/10 [====] - 1s - loss: 1.0"), 2)
	require.True(t, ok)
	st := m.State()
	m2, _ := Compile(Rule{Preset: "keras"})
	require.NoError(t, m2.Restore(st))
	rec, ok := m2.Match([]byte("5/10 [==] - 1s - loss: 0.9"), 3)
	require.True(t, ok)
	assert.Equal(t, int64(25), rec.Step, "epoch 3 of 10 batches, restored")
}

func FuzzMatch(f *testing.F) {
	for _, s := range []string{
		"| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.00 | loss  7.63 | ppl  2066.57",
		"1875/1875 [======] - 4s 2ms/step - loss: 0.2983 - accuracy: 0.9134",
		"Epoch 3: 45%|████▌ | 45/100 [00:01<00:02, 30.12it/s, loss=0.123]",
		"INFO:root:loss=0.5 epoch: 3",
		"\x1b[31m2024-05-01 12:00:00,1 - x - INFO - a=1\r",
		"{'loss': 0.6931, 'grad_norm': nan, 'learning_rate': 4.9e-05, 'epoch': 0.01}",
		"{'step': 3, 'loss': tensor(0.25, device='cuda:0', grad_fn=<AddBackward0>), 'f1': np.float32(0.5)}",
		"[3]\ttrain-logloss:0.57000\teval-logloss:0.67000",
		"[3]\ttraining's binary_logloss: 0.57\tvalid_1's auc: 0.91",
		"Iteration 3, loss = 0.76666667",
		"Norm: 6.88, NNZs: 4, Bias: -0.355, T: 150, Avg. loss: 0.210",
		"-------  ------------  -----------",
		"epoch 001:    100 / 1102 loss=9.932, nll_loss=9.31, num_updates=100",
		"valid | epoch 001 | valid on 'valid' subset | loss 8.601 | num_updates 1102",
		"Test net output #0: accuracy = 0.9712",
	} {
		f.Add(s)
	}
	var ms []*Matcher
	for _, p := range Presets {
		m, _ := Compile(Rule{Preset: p})
		ms = append(ms, m)
	}
	pat, _ := Compile(Rule{Pattern: `(?P<step>\d+) (?P<loss>\S+)`})
	ms = append(ms, pat)
	var scratch []byte
	f.Fuzz(func(t *testing.T, line string) {
		Segments([]byte(line), &scratch, func(seg []byte) {
			rest := StripLogPrefix(seg)
			if len(rest) > len(seg) {
				t.Fatalf("prefix grew the segment")
			}
			for _, m := range ms {
				rec, ok := m.Match(rest, 1)
				if ok && (len(rec.Values) == 0 || rec.Step < 0) {
					t.Fatalf("%s: bad record %+v from %q", m.Rule.Name(), rec, rest)
				}
			}
		})
	})
}

func TestPyDict(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		in   string
		want []KV
		ok   bool
	}{
		{`{'loss': 0.6931, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.01}`,
			[]KV{{"loss", 0.6931}, {"grad_norm", 1.5}, {"learning_rate", 4.9e-05}, {"epoch", 0.01}}, true},
		{`{"it's": 1, 'a\'b': -2}`, []KV{{"it's", 1}, {"a'b", -2}}, true},
		{`{'acc': tensor(0.25), 'x': tensor(0.5, device='cuda:0', grad_fn=<AddBackward0>), 'y': tensor([1., 2.])}`,
			[]KV{{"acc", 0.25}, {"x", 0.5}}, true},
		{`{'f1': np.float32(0.5), 'n': np.int64(3), 'm': numpy.float64(-1e-3), 'z': array(2.5, dtype=float32)}`,
			[]KV{{"f1", 0.5}, {"n", 3}, {"m", -1e-3}, {"z", 2.5}}, true},
		{`{'a': nan, 'b': inf, 'c': -inf, 'd': True, 'e': None, 'f': 'text', 'g': [1, {'h': 2}], 'i': 1_000,}`,
			[]KV{{"a", nan}, {"b", math.Inf(1)}, {"c", math.Inf(-1)}, {"d", 1}, {"i", 1000}}, true},
		{`{}`, nil, true},
		{`{'loss': 0.5} trailing`, nil, false},
		{`{'loss': 0.5`, nil, false},
		{`{loss: 0.5}`, nil, false},
		{`{'a': (1, 2]}`, nil, false},
		{`{'a': 1.2.3}`, nil, false},
	} {
		got, ok := PyDict([]byte(c.in), nil)
		require.Equal(t, c.ok, ok, c.in)
		if !ok {
			continue
		}
		require.Len(t, got, len(c.want), c.in)
		for i := range got {
			assert.Equal(t, c.want[i].Key, got[i].Key, c.in)
			if math.IsNaN(c.want[i].Value) {
				assert.True(t, math.IsNaN(got[i].Value), c.in)
			} else {
				assert.Equal(t, c.want[i].Value, got[i].Value, c.in)
			}
		}
	}
}

func TestLibraryPresets(t *testing.T) {
	type rec struct {
		step int64
		vals string
	}
	read := func(preset string, lines ...string) []rec {
		m, err := Compile(Rule{Preset: preset})
		require.NoError(t, err)
		var out []rec
		for i, l := range lines {
			r, ok := m.Match([]byte(l), int64(i+1))
			if !ok {
				continue
			}
			var parts []string
			for _, kv := range r.Values {
				parts = append(parts, fmt.Sprintf("%s=%g", kv.Key, kv.Value))
			}
			out = append(out, rec{r.Step, strings.Join(parts, " ")})
		}
		return out
	}
	// Trainer's evaluation and summary share the step of the training log
	// they follow; the next training log is the next step.
	assert.Equal(t, []rec{{0, "loss=0.7 epoch=0.5"}, {0, "eval_loss=0.6 epoch=0.5"}, {1, "loss=0.5 epoch=1"}, {1, "train_loss=0.6 epoch=1"}},
		read("hf-trainer", "{'loss': 0.7, 'epoch': 0.5}", "{'eval_loss': 0.6, 'epoch': 0.5}", "{'loss': 0.5, 'epoch': 1.0}",
			"{'train_loss': 0.6, 'epoch': 1.0}", "{'config': 1}"))
	assert.Equal(t, []rec{{4, "loss=0.5"}, {0, "lr=0.1"}}, read("python", "{'step': 4, 'loss': 0.5}", "{'lr': 0.1}"))
	assert.Equal(t, []rec{{3, "train-rmse=0.35 train-rmse-std=0.01 test-rmse=0.37 test-rmse-std=0.02"}, {7, "learn=0.5731 test=0.671 best=0.671"}},
		read("gbdt", "[3]\ttrain-rmse:0.35+0.01\ttest-rmse:0.37+0.02", "7:\tlearn: 0.5731\ttest: 0.6710\tbest: 0.6710 (3)\ttotal: 5ms\tremaining: 1s", "[LightGBM] [Info] x"))
	// Lines come with their leading spaces stripped; an empty cell is empty.
	assert.Equal(t, []rec{{1, "train_loss=0.7"}, {2, "train_loss=0.6"}},
		read("skorch", "epoch    cp    train_loss", "-------  ----  ------------", "1     +        0.7000", "2              0.6000"))
	assert.Equal(t, []rec{{100, "loss=9.9"}, {300, "valid/loss=8.6"}, {300, "train/loss=9.3"}},
		read("fairseq", "train_inner | epoch 001:    100 / 300 loss=9.9, num_updates=100",
			"valid | epoch 001 | valid on 'valid' subset | loss 8.6 | num_updates 300", "train | epoch 001 | loss 9.3 | num_updates 300"))
}

// FuzzPyDict: any input is read without a panic, and a dict written as
// Python's repr writes one is read back exactly.
func FuzzPyDict(f *testing.F) {
	f.Add("{'loss': tensor(0.25, device='cuda:0'), 'x': [1, (2, {'y': 'z'})]}", "loss", 0.25)
	f.Add("{'a': np.float32(nan)}", "it's", -1e-300)
	f.Fuzz(func(t *testing.T, line, key string, v float64) {
		if got, ok := PyDict([]byte(line), nil); ok {
			for _, kv := range got {
				if !strings.Contains(line, kv.Key) && !strings.ContainsAny(kv.Key, "'\"\\") {
					t.Fatalf("key %q is not in %q", kv.Key, line)
				}
			}
		}
		if strings.ContainsAny(key, "\\\n\r'\"") || math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		repr := fmt.Sprintf("{'%s': %s, 'other': 'x'}", key, strconv.FormatFloat(v, 'g', -1, 64))
		got, ok := PyDict([]byte(repr), nil)
		if !ok || len(got) != 1 || got[0].Key != key || got[0].Value != v {
			t.Fatalf("%s read as %v, %v", repr, got, ok)
		}
	})
}
