package template

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func exampleTemplate(t *testing.T) *Template {
	t.Helper()
	tp, err := Parse("digits.yaml", []byte(example))
	require.NoError(t, err)
	return tp
}

// fiveParams has exactly the parameters the expected messages name.
func fiveParams(t *testing.T) *Template {
	t.Helper()
	tp, err := Parse("t.yaml", []byte(`name: t
params:
  lr:         {type: float, default: 0.01, min: 0.00001, max: 1.0}
  hidden:     {type: int, default: 64, min: 8, max: 1024}
  epochs:     {type: int, default: 30, min: 1}
  optimizer:  {type: choice, default: adam, choices: [adam, sgd]}
  batch_size: {type: int, default: 64, max: 1024}
stages: [{name: a, command: [x]}]
`))
	require.NoError(t, err)
	return tp
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name    string
		sets    map[string]string
		want    map[string]any // overrides of the defaults
		wantErr string
	}{
		{name: "no sets gives the defaults", sets: nil, want: nil},
		{name: "float", sets: map[string]string{"lr": "0.1"}, want: map[string]any{"lr": 0.1}},
		{name: "float in exponent form", sets: map[string]string{"lr": "1e-3"}, want: map[string]any{"lr": 0.001}},
		{name: "float at its bounds", sets: map[string]string{"lr": "1"}, want: map[string]any{"lr": 1.0}},
		{name: "int", sets: map[string]string{"hidden": "128"}, want: map[string]any{"hidden": int64(128)}},
		{name: "int with spaces", sets: map[string]string{"hidden": " 128 "}, want: map[string]any{"hidden": int64(128)}},
		{name: "int written as whole float", sets: map[string]string{"hidden": "1e3"}, want: map[string]any{"hidden": int64(1000)}},
		{name: "choice", sets: map[string]string{"optimizer": "sgd"}, want: map[string]any{"optimizer": "sgd"}},
		{name: "bool true", sets: map[string]string{"augment": "true"}, want: map[string]any{"augment": true}},
		{name: "bool yes", sets: map[string]string{"augment": "yes"}, want: map[string]any{"augment": true}},
		{name: "bool 1", sets: map[string]string{"augment": "1"}, want: map[string]any{"augment": true}},
		{name: "bool no", sets: map[string]string{"augment": "NO"}, want: map[string]any{"augment": false}},
		{name: "bool 0", sets: map[string]string{"augment": "0"}, want: map[string]any{"augment": false}},
		{name: "string kept verbatim", sets: map[string]string{"note": " hi there "}, want: map[string]any{"note": " hi there "}},
		{name: "several at once", sets: map[string]string{"lr": "0.5", "epochs": "3"}, want: map[string]any{"lr": 0.5, "epochs": int64(3)}},

		{name: "float not a number", sets: map[string]string{"lr": "abc"}, wantErr: `lr: "abc" is not a number (lr is a float between 1e-05 and 1)`},
		{name: "float nan", sets: map[string]string{"lr": "NaN"}, wantErr: `lr: "NaN" is not a number`},
		{name: "float empty", sets: map[string]string{"lr": ""}, wantErr: `lr: "" is not a number`},
		{name: "float above max", sets: map[string]string{"lr": "5"}, wantErr: `lr: 5 is above the maximum (lr is a float between 1e-05 and 1)`},
		{name: "float below min", sets: map[string]string{"lr": "0"}, wantErr: `lr: 0 is below the minimum (lr is a float between 1e-05 and 1)`},
		{name: "int not whole", sets: map[string]string{"hidden": "6.5"}, wantErr: `hidden: "6.5" is not a whole number (hidden is an integer between 8 and 1024)`},
		{name: "int above max", sets: map[string]string{"hidden": "4096"}, wantErr: `hidden: 4096 is above the maximum (hidden is an integer between 8 and 1024)`},
		{name: "int below only a min", sets: map[string]string{"epochs": "0"}, wantErr: `epochs: 0 is below the minimum (epochs is an integer between 1 and 500)`},
		{name: "choice not a choice", sets: map[string]string{"optimizer": "adamw"}, wantErr: `optimizer: "adamw" is not one of the choices (optimizer is one of: adam, sgd)`},
		{name: "bool not a bool", sets: map[string]string{"augment": "maybe"}, wantErr: `augment: "maybe" is not true or false (augment is true or false (also yes/no, 1/0))`},
		{name: "string with a NUL", sets: map[string]string{"note": "a\x00b"}, wantErr: `note: "a\x00b" contains a NUL character, which a command line cannot carry (note is a string)`},
		{name: "string not UTF-8", sets: map[string]string{"note": "\xe8"}, wantErr: `note: "\xe8" is not valid UTF-8 text (note is a string)`},
		{name: "unknown name", sets: map[string]string{"lrr": "1"}, wantErr: `unknown parameter "lrr" (known: augment, batch_size, epochs, hidden, lr, note, optimizer)`},
		{name: "every bad entry reported", sets: map[string]string{"lr": "x", "hidden": "y"}, wantErr: "hidden: \"y\" is not a whole number (hidden is an integer between 8 and 1024)\nlr: \"x\" is not a number"},
	}
	tp := exampleTemplate(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tp.Resolve(tc.sets)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			want := tp.Defaults()
			for k, v := range tc.want {
				want[k] = v
			}
			require.Equal(t, want, got)
			require.NoError(t, tp.Validate(got))
		})
	}
}

func TestResolveMessagesFromTheBrief(t *testing.T) {
	tp := fiveParams(t)
	_, err := tp.Resolve(map[string]string{"lrr": "0.1"})
	require.EqualError(t, err, `unknown parameter "lrr" (known: batch_size, epochs, hidden, lr, optimizer)`)
	_, err = tp.Resolve(map[string]string{"lr": "abc"})
	require.EqualError(t, err, `lr: "abc" is not a number (lr is a float between 1e-05 and 1)`)
	_, err = tp.Resolve(map[string]string{"epochs": "0"})
	require.EqualError(t, err, `epochs: 0 is below the minimum (epochs is an integer of at least 1)`)
	_, err = tp.Resolve(map[string]string{"batch_size": "2048"})
	require.EqualError(t, err, `batch_size: 2048 is above the maximum (batch_size is an integer of at most 1024)`)

	none, err := Parse("t.yaml", []byte("name: t\nstages: [{name: a, command: [x]}]\n"))
	require.NoError(t, err)
	_, err = none.Resolve(map[string]string{"lr": "1"})
	require.EqualError(t, err, `unknown parameter "lr" (this template has no parameters)`)
}

func TestValidate(t *testing.T) {
	tp := exampleTemplate(t)
	with := func(k string, v any) Values {
		d := tp.Defaults()
		d[k] = v
		return d
	}
	without := func(k string) Values {
		d := tp.Defaults()
		delete(d, k)
		return d
	}
	cases := []struct {
		name    string
		values  Values
		wantErr string
	}{
		{name: "defaults", values: tp.Defaults()},
		{name: "float in range", values: with("lr", 0.5)},
		{name: "float given as a Go int", values: with("lr", 1)},
		{name: "int given as int", values: with("hidden", 128)},
		{name: "int given as int32", values: with("hidden", int32(128))},
		{name: "int given as uint8", values: with("hidden", uint8(128))},
		{name: "bool", values: with("augment", true)},
		{name: "choice", values: with("optimizer", "sgd")},

		{name: "missing parameter", values: without("lr"), wantErr: `missing value for parameter "lr" (lr is a float between 1e-05 and 1)`},
		{name: "unknown parameter", values: with("lrr", 0.1), wantErr: `unknown parameter "lrr" (known: augment, batch_size, epochs, hidden, lr, note, optimizer)`},
		{name: "float above max", values: with("lr", 2.0), wantErr: `lr: 2 is above the maximum (lr is a float between 1e-05 and 1)`},
		{name: "float nan", values: with("lr", nan()), wantErr: `lr: NaN is not a number`},
		{name: "float given as string", values: with("lr", "0.1"), wantErr: `lr: "0.1" is not a number`},
		{name: "int given as float64", values: with("hidden", 64.0), wantErr: `hidden: 64 is a float; int parameters take a Go integer such as int64`},
		{name: "int given as fractional float", values: with("hidden", 64.5), wantErr: `hidden: 64.5 is not a whole number`},
		{name: "int below min", values: with("hidden", int64(2)), wantErr: `hidden: 2 is below the minimum (hidden is an integer between 8 and 1024)`},
		{name: "int huge uint64", values: with("hidden", uint64(1<<63)), wantErr: `hidden: 9223372036854775808 (uint64) is not a whole number`},
		{name: "bool given as string", values: with("augment", "true"), wantErr: `augment: "true" is not true or false`},
		{name: "choice not among choices", values: with("optimizer", "adamw"), wantErr: `optimizer: "adamw" is not one of the choices (optimizer is one of: adam, sgd)`},
		{name: "choice given as int", values: with("optimizer", 1), wantErr: `optimizer: 1 is not a string`},
		{name: "string given as nil", values: with("note", nil), wantErr: `note: null is not a string`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tp.Validate(tc.values)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestNormalize(t *testing.T) {
	tp := exampleTemplate(t)
	got, err := tp.Normalize(Values{"lr": float32(0.5), "hidden": 128.0, "epochs": "7", "augment": "yes", "batch_size": uint16(16)})
	require.NoError(t, err)
	want := tp.Defaults()
	want["lr"] = 0.5
	want["hidden"] = int64(128)
	want["epochs"] = int64(7)
	want["augment"] = true
	want["batch_size"] = int64(16)
	require.Equal(t, want, got)
	require.NoError(t, tp.Validate(got))

	_, err = tp.Normalize(Values{"hidden": 128.5, "lr": 3.0, "x": 1})
	require.ErrorContains(t, err, "lr: 3 is above the maximum")
	require.ErrorContains(t, err, "hidden: 128.5 is not a whole number")
	require.ErrorContains(t, err, `unknown parameter "x"`)
}

func TestValuesStrings(t *testing.T) {
	v := Values{
		"lr": 0.00001, "big": 1e21, "third": 1.0 / 3, "whole": 2.0, "f32": float32(0.1),
		"hidden": int64(64), "neg": -3, "u": uint64(1 << 63),
		"on": true, "off": false, "s": "a b", "empty": "",
	}
	require.Equal(t, map[string]string{
		"lr": "1e-05", "big": "1e+21", "third": "0.3333333333333333", "whole": "2", "f32": "0.1",
		"hidden": "64", "neg": "-3", "u": "9223372036854775808",
		"on": "true", "off": "false", "s": "a b", "empty": "",
	}, v.Strings())
	require.Equal(t, map[string]string{"params.lr": "1e-05"}, Values{"lr": 0.00001}.ParamVars())
}

func TestValuesJSONRoundTrip(t *testing.T) {
	tp := exampleTemplate(t)
	v, err := tp.Resolve(map[string]string{"lr": "0.1", "hidden": "128", "augment": "true", "note": `<a & "b">`, "optimizer": "sgd"})
	require.NoError(t, err)

	data, err := v.JSON()
	require.NoError(t, err)
	require.Equal(t, `{"augment":true,"batch_size":64,"epochs":30,"hidden":128,"lr":0.1,"note":"<a & \"b\">","optimizer":"sgd"}`, string(data))

	back, err := ValuesFromJSON(tp, data)
	require.NoError(t, err)
	require.Equal(t, v, back)
	require.IsType(t, int64(0), back["hidden"])
	require.IsType(t, float64(0), back["lr"])

	again, err := back.JSON()
	require.NoError(t, err)
	require.Equal(t, data, again, "canonical: encoding is stable")

	// A whole-number float keeps its type through JSON ("1", not "1.0").
	v["lr"] = 1.0
	data, err = v.JSON()
	require.NoError(t, err)
	back, err = ValuesFromJSON(tp, data)
	require.NoError(t, err)
	require.Equal(t, 1.0, back["lr"])

	empty, err := Values(nil).JSON()
	require.NoError(t, err)
	require.Equal(t, "{}", string(empty))

	_, err = Values{"lr": nan()}.JSON()
	require.Error(t, err)
	_, err = Values{"note": "\xe8"}.JSON()
	require.ErrorContains(t, err, "is not valid UTF-8 text")
}

func TestValuesFromJSON(t *testing.T) {
	tp := exampleTemplate(t)
	cases := []struct {
		name    string
		json    string
		want    Values
		wantErr string
	}{
		{name: "partial object is fine", json: `{"lr": 0.5, "hidden": 10}`, want: Values{"lr": 0.5, "hidden": int64(10)}},
		{name: "int written as whole float", json: `{"hidden": 10.0}`, want: Values{"hidden": int64(10)}},
		{name: "int in exponent form", json: `{"hidden": 1e2}`, want: Values{"hidden": int64(100)}},
		{name: "large int is exact", json: `{"epochs": 9007199254740993}`, wantErr: "epochs: 9007199254740993 is above the maximum"},
		{name: "empty object", json: `{}`, want: Values{}},
		{name: "unknown name", json: `{"lrr": 1}`, wantErr: `unknown parameter "lrr"`},
		{name: "int not whole", json: `{"hidden": 10.5}`, wantErr: "hidden: 10.5 is not a whole number"},
		{name: "number for a bool", json: `{"augment": 1}`, wantErr: "augment: 1 is not true or false"},
		{name: "string for a float", json: `{"lr": "0.1"}`, wantErr: `lr: "0.1" is not a number`},
		{name: "out of range", json: `{"lr": 3}`, wantErr: "lr: 3 is above the maximum"},
		{name: "not a choice", json: `{"optimizer": "rmsprop"}`, wantErr: `optimizer: "rmsprop" is not one of the choices`},
		{name: "null value", json: `{"note": null}`, wantErr: "note: null is not a string"},
		{name: "nested object", json: `{"note": {"a": 1}}`, wantErr: "note: map[a:1] (map[string]interface {}) is not a string"},
		{name: "not an object", json: `[1]`, wantErr: "parameter values are not a JSON object"},
		{name: "null document", json: `null`, wantErr: "want a JSON object, got null"},
		{name: "trailing data", json: `{} {}`, wantErr: "unexpected data after the JSON object"},
		{name: "broken JSON", json: `{"lr": }`, wantErr: "parameter values are not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValuesFromJSON(tp, []byte(tc.json))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func nan() float64 { return math.NaN() }
