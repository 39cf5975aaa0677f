package provenance

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sampleInputs() Inputs {
	return Inputs{
		Template: Template{Name: "digits-mlp", Version: "1", Stages: []Stage{
			{Name: "prep", Command: []string{"python3", "${code}/prep.py"}},
			{Name: "train", Command: []string{"python3", "${code}/train.py", "--lr", "${params.lr}"}, Env: map[string]string{"OMP_NUM_THREADS": "1"}},
		}},
		Params:  map[string]string{"lr": "0.01", "epochs": "5"},
		Seed:    42,
		Runtime: Runtime{Kind: "local", Interpreters: []string{"python3=/usr/bin/python3.11 sha256:ab"}},
		Code:    "git:4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		Data:    []DataFile{{Path: "train.csv", Size: 10, SHA256: "aa"}, {Path: "test.csv", Size: 5, SHA256: "bb"}},
	}
}

// TestFingerprintGolden pins the encoding: the same inputs must give the
// same fingerprint in every build of Niuma, or every stored fingerprint
// stops matching. If this test fails, the layout changed: bump magic. The
// golden value was computed by a separate Python implementation of the
// layout documented on Encode, so the doc and the code agree.
func TestFingerprintGolden(t *testing.T) {
	assert.Equal(t, "sha256:e4afd8558ed65817eaeefda186c6367daba12f5dac5e740883ac48f9d2d30171", Fingerprint(sampleInputs()))
}

func TestEveryChangeChangesTheFingerprint(t *testing.T) {
	base := Fingerprint(sampleInputs())
	tests := []struct {
		name   string
		change func(*Inputs)
	}{
		{"template name", func(in *Inputs) { in.Template.Name = "digits-cnn" }},
		{"template version", func(in *Inputs) { in.Template.Version = "2" }},
		{"stage name", func(in *Inputs) { in.Template.Stages[0].Name = "prepare" }},
		{"stage order", func(in *Inputs) {
			s := in.Template.Stages
			s[0], s[1] = s[1], s[0]
		}},
		{"command argument", func(in *Inputs) { in.Template.Stages[1].Command[3] = "${params.lr2}" }},
		{"argument split differently", func(in *Inputs) {
			in.Template.Stages[1].Command = []string{"python3", "${code}/train.py --lr", "${params.lr}"}
		}},
		{"stage env", func(in *Inputs) { in.Template.Stages[1].Env["OMP_NUM_THREADS"] = "2" }},
		{"parameter value", func(in *Inputs) { in.Params["lr"] = "0.02" }},
		{"parameter added", func(in *Inputs) { in.Params["wd"] = "0" }},
		{"seed", func(in *Inputs) { in.Seed = 43 }},
		{"runtime kind", func(in *Inputs) { in.Runtime.Kind = "docker" }},
		{"image", func(in *Inputs) { in.Runtime.Image = "niuma/demo:1" }},
		{"image digest", func(in *Inputs) { in.Runtime.ImageDigest = "sha256:01" }},
		{"interpreter", func(in *Inputs) { in.Runtime.Interpreters = []string{"python3=/usr/bin/python3.12 sha256:cd"} }},
		{"code", func(in *Inputs) { in.Code += "+dirty:00" }},
		{"data content", func(in *Inputs) { in.Data[0].SHA256 = "ab" }},
		{"data size", func(in *Inputs) { in.Data[0].Size = 11 }},
		{"data path", func(in *Inputs) { in.Data[0].Path = "train2.csv" }},
		{"data file removed", func(in *Inputs) { in.Data = in.Data[:1] }},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := sampleInputs()
			tt.change(&in)
			fp := Fingerprint(in)
			if other, dup := seen[fp]; dup {
				t.Fatalf("same fingerprint as %q", other)
			}
			seen[fp] = tt.name
		})
	}
}

func TestOrderOfMapsAndManifestsDoesNotMatter(t *testing.T) {
	a := sampleInputs()
	b := sampleInputs()
	b.Data[0], b.Data[1] = b.Data[1], b.Data[0]
	b.Runtime.Interpreters = []string{"python3=/usr/bin/python3.11 sha256:ab"}
	b.Params = map[string]string{"epochs": "5", "lr": "0.01"}
	assert.Equal(t, Fingerprint(a), Fingerprint(b))
	// Encode does not reorder the caller's slices.
	assert.Equal(t, "test.csv", b.Data[0].Path)
}

// fuzzInputs builds Inputs from a few strings, in a shape where different
// strings are different inputs.
func fuzzInputs(name, arg1, arg2, key, val string, seed int64) Inputs {
	return Inputs{
		Template: Template{Name: name, Stages: []Stage{{Name: "s", Command: []string{arg1, arg2}}}},
		Params:   map[string]string{key: val},
		Seed:     seed,
		Code:     arg1 + val,
	}
}

// FuzzEncode checks that the encoding is injective: two inputs encode alike
// exactly when they are the same inputs, however their strings are cut.
func FuzzEncode(f *testing.F) {
	f.Add("a", "b", "c", "k", "v", int64(1), "ab", "", "c", "k", "v", int64(1))
	f.Add("n", "x\x01", "y", "k", "v", int64(-1), "n", "x", "\x01y", "k", "v", int64(-1))
	f.Fuzz(func(t *testing.T, n1, a1, b1, k1, v1 string, s1 int64, n2, a2, b2, k2, v2 string, s2 int64) {
		x, y := fuzzInputs(n1, a1, b1, k1, v1, s1), fuzzInputs(n2, a2, b2, k2, v2, s2)
		same := reflect.DeepEqual(x, y)
		enc := bytes.Equal(Encode(x), Encode(y))
		if same != enc {
			t.Fatalf("inputs equal: %v, encodings equal: %v\n%+v\n%+v", same, enc, x, y)
		}
		if !bytes.Equal(Encode(x), Encode(x)) {
			t.Fatal("encoding is not deterministic")
		}
	})
}
