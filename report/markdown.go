package report

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"niuma/printable"
)

// File is one file of a multi-file report, named relative to the main
// document.
type File struct {
	Name string // slash-separated, relative to the Markdown file
	Data []byte
}

// Markdown renders the report as GitHub-flavoured Markdown. The charts are
// PNG files the document links to under dir (a folder name relative to the
// Markdown file, such as "report_files"); the caller writes them there.
func Markdown(rep *Report, opt Options, dir string) (doc []byte, files []File, err error) {
	o, err := build(rep, opt)
	if err != nil {
		return nil, nil, err
	}
	if dir == "" {
		dir = "figures"
	}
	pngs, err := renderPNGsScreen(o.figs)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", mdText(o.title))
	if o.subtitle != "" {
		fmt.Fprintf(&b, "_%s_\n\n", mdText(o.subtitle))
	}
	for _, bl := range o.blocks {
		switch bl.kind {
		case bHeading:
			fmt.Fprintf(&b, "%s %s\n\n", strings.Repeat("#", bl.level), mdText(bl.text))
		case bPara:
			fmt.Fprintf(&b, "%s\n\n", mdText(bl.text))
		case bFacts:
			for _, it := range bl.facts {
				fmt.Fprintf(&b, "- **%s:** %s\n", mdText(it.Label), mdText(it.Value))
			}
			b.WriteString("\n")
		case bTable:
			mdTable(&b, bl)
		case bFigure:
			name := fmt.Sprintf("fig%02d-%s.png", bl.fig+1, slug(o.figs[bl.fig].Title))
			files = append(files, File{Name: path.Join(dir, name), Data: pngs[bl.fig]})
			fmt.Fprintf(&b, "![%s](<%s>)\n\n", mdText(o.figs[bl.fig].Title), path.Join(dir, name))
			if c := o.figs[bl.fig].Caption; c != "" {
				fmt.Fprintf(&b, "_%s_\n\n", mdText(c))
			}
		case bPre:
			fence := "```"
			for strings.Contains(strings.Join(bl.lines, "\n"), fence) {
				fence += "`"
			}
			lines := make([]string, len(bl.lines))
			for i, l := range bl.lines {
				lines[i] = printable.Text(l) // a log tail: what the workload wrote
			}
			fmt.Fprintf(&b, "%s text\n%s\n%s\n\n", fence, strings.Join(lines, "\n"), fence)
		}
	}
	return b.Bytes(), files, nil
}

func renderPNGsScreen(figs []figure) ([][]byte, error) { return renderAll(figs, "png", 640, 0) }

func mdTable(b *bytes.Buffer, bl block) {
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + mdCell(c) + " |")
		}
		b.WriteString("\n")
	}
	row(bl.head)
	b.WriteString("|")
	for i := range bl.head {
		if align(bl, i) == "R" {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range bl.rows {
		row(r)
	}
	b.WriteString("\n")
}

var (
	mdLines   = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")
	mdEscaper = strings.NewReplacer(
		`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
		"<", "&lt;", ">", "&gt;", "#", `\#`, "|", `\|`,
	)
)

// mdText escapes what Markdown would read as formatting or HTML, joins
// lines, and shows every other control character as a visible escape
// (printable.String), which Markdown then keeps as written.
func mdText(s string) string { return mdEscaper.Replace(printable.String(mdLines.Replace(s))) }

func mdCell(s string) string {
	if s == "" {
		return " "
	}
	return mdText(s)
}

// slug makes a file-name-safe version of a chart title.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "chart"
	}
	return out
}
