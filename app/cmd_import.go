package app

import (
	"context"
	"fmt"
	"strings"
)

// importCmd is `niuma import tensorboard LOGDIR`.
func (c *cli) importCmd(ctx context.Context, args []string) error {
	fs := c.flags("import")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != "tensorboard" {
		return exitError{code: 2, msg: "import needs what and where: niuma import tensorboard LOGDIR (the folder TensorBoard was started with)"}
	}
	s, err := open(c.err)
	if err != nil {
		return err
	}
	defer s.close()
	runs, err := s.engine.ImportTensorBoard(ctx, pos[1], func(folder string) {
		if !*asJSON {
			fmt.Fprintf(c.err, "importing %s\n", folder)
		}
	})
	if *asJSON {
		if werr := writeJSON(c.out, runs); werr != nil {
			return werr
		}
		return err
	}
	tw := newTable(c.out, "FOLDER", "RUN", "POINTS", "PARAMS")
	for _, r := range runs {
		if r.Skipped != "" {
			tw.row(r.Folder, r.RunID, "-", r.Skipped)
			continue
		}
		var ps []string
		for _, k := range sortedParamNames(r.Params) {
			ps = append(ps, fmt.Sprintf("%s=%v", k, r.Params[k]))
		}
		tw.row(r.Folder, r.RunID, fmt.Sprint(r.Points), strings.Join(ps, " "))
	}
	if ferr := tw.flush(); ferr != nil {
		return ferr
	}
	return err
}

func sortedParamNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
