// Package printable makes text that a workload or a template wrote safe to
// show: in a terminal, a CSV cell, a Markdown document or a message.
//
// A metric key, a parameter value, a stage's log or a name in a template
// may carry control characters: an escape sequence that retitles the
// terminal, moves the cursor, writes the clipboard or hides what follows;
// a carriage return that overwrites a line; a bidirectional override that
// shows text in another order than it is stored. String turns each of them
// into a visible escape (\x1b, \r, \u202e) and leaves everything else as
// it is; Text does the same but keeps line breaks and tabs, for multi-line
// output such as a log. Cut also shortens what is too long to echo, and
// TooLong says how long it was instead of repeating it.
//
// It is pure and imports no Niuma package.
package printable
