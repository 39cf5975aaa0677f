package template

import (
	"fmt"
	"strings"
)

// Expand replaces each ${name} in arg with vars[name]. Names are the
// engine variables (code, run_dir, stage_dir, run_id, stage, seed) and
// params.NAME; "$$" is a literal "$", and a "$" followed by anything else is
// kept as is. An unknown ${x}, an empty ${} or an unterminated "${" is an
// error naming the culprit. The replacement text is not expanded again.
func Expand(arg string, vars map[string]string) (string, error) {
	if !strings.Contains(arg, "$") {
		return arg, nil
	}
	var b strings.Builder
	err := scan(arg, func(lit string) { b.WriteString(lit) }, func(name string) error {
		v, ok := vars[name]
		if !ok {
			return fmt.Errorf("unknown variable ${%s} in %q", name, arg)
		}
		b.WriteString(v)
		return nil
	})
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// References returns the names of the ${...} references in arg, in order,
// or an error for an empty ${} or an unterminated "${".
func References(arg string) ([]string, error) {
	var names []string
	err := scan(arg, func(string) {}, func(name string) error {
		names = append(names, name)
		return nil
	})
	return names, err
}

// scan walks arg, calling lit for literal text and ref for each ${name}.
func scan(whole string, lit func(string), ref func(string) error) error {
	arg := whole
	for {
		i := strings.IndexByte(arg, '$')
		if i < 0 || i == len(arg)-1 {
			lit(arg)
			return nil
		}
		switch arg[i+1] {
		case '$':
			lit(arg[:i+1])
			arg = arg[i+2:]
		case '{':
			lit(arg[:i])
			end := strings.IndexByte(arg[i+2:], '}')
			if end < 0 {
				return fmt.Errorf("unterminated \"${\" in %q; close it with } or write $$ for a literal $", whole)
			}
			name := arg[i+2 : i+2+end]
			if name == "" {
				return fmt.Errorf("empty ${} in %q; write $$ for a literal $", whole)
			}
			if err := ref(name); err != nil {
				return err
			}
			arg = arg[i+2+end+1:]
		default:
			lit(arg[:i+1])
			arg = arg[i+1:]
		}
	}
}
