package template

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a template: the line it is on (0 when it
// concerns the whole file) and a sentence saying what to fix.
type Problem struct {
	Line int
	Msg  string
}

// ValidationError is what Parse returns for a template it rejects. It holds
// every problem found, ordered by line; Error() gives one line per problem,
// "source:line: message", the first line being the one to fix first.
type ValidationError struct {
	Source   string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Format(p))
	}
	return b.String()
}

// Format renders one problem as "source:line: message".
func (e *ValidationError) Format(p Problem) string {
	src := e.Source
	if src == "" {
		src = "template"
	}
	if p.Line <= 0 {
		return fmt.Sprintf("%s: %s", src, p.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", src, p.Line, p.Msg)
}
