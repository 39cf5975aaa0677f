package provenance

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strconv"
)

// Inputs are everything that determines what a run computes.
type Inputs struct {
	Template Template
	Params   map[string]string // parameter name → value, as the stage sees it (${params.NAME})
	Seed     int64
	Runtime  Runtime
	Code     string     // CodeHash's result ("" when the template has no code dir)
	Data     []DataFile // DataManifest's result
}

// Template is the part of a template that decides what its stages run.
type Template struct {
	Name, Version string
	Stages        []Stage // in the order the engine runs them
}

// Stage is one stage's command line and extra environment.
type Stage struct {
	Name    string
	Command []string // argv before ${...} expansion
	Env     map[string]string
}

// Runtime is where the stages run.
type Runtime struct {
	Kind        string // "local" or "docker"
	Image       string // docker: the image reference
	ImageDigest string // docker: the image's ID or repo digest, when known
	// Interpreters (local): per executable a stage names, its resolved path
	// and content hash (see Interpreter).
	Interpreters []string
}

// DataFile is one file of a data manifest.
type DataFile struct {
	Path   string // relative to the data dir, with forward slashes
	Size   int64
	SHA256 string // hex
}

// magic starts every encoding; a change of the layout gets a new version so
// old fingerprints are never confused with new ones.
const magic = "niuma-fingerprint-v1"

// Encode returns the canonical encoding of in, the bytes Fingerprint
// hashes. The layout (version 1) is a sequence of items, each a string:
// an unsigned LEB128 varint byte length followed by the bytes. Integers are
// written as decimal strings, lists as their decimal length followed by the
// items, maps as lists of key, value pairs sorted by key. In order:
//
//	"niuma-fingerprint-v1"
//	"template" name version  len(stages) {name len(argv) argv... len(env) {k v}...}...
//	"params"   len(params) {name value}...            (sorted by name)
//	"seed"     seed
//	"runtime"  kind image image_digest len(interpreters) interpreters... (sorted)
//	"code"     code
//	"data"     len(files) {path size sha256}...       (sorted by path)
//
// Every item is length-prefixed, so no two different inputs encode alike
// (no separator can be forged by a value), and map order or data listing
// order cannot change it.
func Encode(in Inputs) []byte {
	var e encoder
	e.str(magic)

	e.str("template")
	e.str(in.Template.Name)
	e.str(in.Template.Version)
	e.int(int64(len(in.Template.Stages)))
	for _, st := range in.Template.Stages {
		e.str(st.Name)
		e.int(int64(len(st.Command)))
		for _, a := range st.Command {
			e.str(a)
		}
		e.strMap(st.Env)
	}

	e.str("params")
	e.strMap(in.Params)

	e.str("seed")
	e.int(in.Seed)

	e.str("runtime")
	e.str(in.Runtime.Kind)
	e.str(in.Runtime.Image)
	e.str(in.Runtime.ImageDigest)
	interp := append([]string(nil), in.Runtime.Interpreters...)
	sort.Strings(interp)
	e.int(int64(len(interp)))
	for _, s := range interp {
		e.str(s)
	}

	e.str("code")
	e.str(in.Code)

	e.str("data")
	data := append([]DataFile(nil), in.Data...)
	sort.Slice(data, func(i, j int) bool { return data[i].Path < data[j].Path })
	e.int(int64(len(data)))
	for _, f := range data {
		e.str(f.Path)
		e.int(f.Size)
		e.str(f.SHA256)
	}
	return e.b
}

// Fingerprint is "sha256:" and the hex SHA-256 of Encode(in).
func Fingerprint(in Inputs) string {
	sum := sha256.Sum256(Encode(in))
	return "sha256:" + hex.EncodeToString(sum[:])
}

type encoder struct{ b []byte }

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) int(n int64) { e.str(strconv.FormatInt(n, 10)) }

func (e *encoder) strMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.int(int64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}
