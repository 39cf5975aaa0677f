package storage

// SQLite's primary result codes Niuma tells apart (sqlite.org/rescode.html),
// as numbers, so that the rules using them build without cgo.
const (
	sqliteReadonly = 8
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)
