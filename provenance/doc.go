// Package provenance says exactly what produced a run: it computes a run's
// fingerprint, a SHA-256 over a canonical encoding (see Encode) of the
// template's name, version and stage commands, the parameter values, the
// seed, the runtime (image digest, or interpreter), the code and the data.
// Two runs with the same fingerprint were produced by the same inputs, so
// the engine can refuse to waste a GPU on a run that already succeeded and
// can flag a pair of them whose results differ as not reproducible.
//
// The inputs are hashed here too:
//
//	CodeHash      a git checkout: the tree of HEAD for the code dir plus a
//	              hash of the uncommitted diff and of untracked files; any
//	              other dir: its files' contents, minus what .gitignore
//	              files ignore
//	DataManifest  path, size and content hash of every file of the data dir
//	Interpreter   the resolved executable of a local stage and its hash
//
// Content hashes go through a Cache keyed by path, size and modification
// time, kept in a file the caller names, so that a 50 GB dataset is read
// once rather than at every submit.
//
// provenance imports no other Niuma package: the engine feeds it plain
// values. It runs git (when installed) and reads files; it never writes
// outside its cache file.
package provenance
