package report

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"

	"codeberg.org/go-fonts/liberation/liberationmonoregular"
	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"codeberg.org/go-pdf/fpdf"
	"golang.org/x/image/font/sfnt"
)

// PDF renders the report as a PDF on A4 or Letter pages with the charts as
// 200 dpi images. Text is set in Liberation Sans, embedded as a Unicode
// font, so accented, Greek and Cyrillic names print as they are; Chinese
// prints in Options.FallbackFont when one is given, and characters no font
// has (emoji, or Chinese without a fallback) print as "?".
func PDF(rep *Report, opt Options) ([]byte, error) {
	o, err := build(rep, opt)
	if err != nil {
		return nil, err
	}
	size := "A4"
	switch strings.ToLower(opt.Page) {
	case "", "a4":
	case "letter":
		size = "Letter"
	default:
		return nil, fmt.Errorf("report: unknown page size %q: use a4 or letter", opt.Page)
	}
	w := newPDFWriter(size, o.title, opt.FallbackFont)
	if len(o.figs) > 0 {
		// Charts as wide as the text, at 200 dpi for print.
		pngs, err := renderPNGs(o.figs, w.textW*72/25.4)
		if err != nil {
			return nil, err
		}
		for i, b := range pngs {
			w.pdf.RegisterImageOptionsReader(figName(i), fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(b))
		}
	}
	w.write(o)
	if err := w.pdf.Error(); err != nil {
		return nil, fmt.Errorf("report: write PDF: %w", err)
	}
	var buf bytes.Buffer
	if err := w.pdf.Output(&buf); err != nil {
		return nil, fmt.Errorf("report: write PDF: %w", err)
	}
	return buf.Bytes(), nil
}

// figAspect is a chart's height over its width on paper: three charts
// and their captions fit on a page.
const figAspect = 0.45

// aspect is the figure's height over its width.
func (f figure) aspect() float64 {
	if f.Tall {
		return 0.6
	}
	return figAspect
}

func figName(i int) string { return fmt.Sprintf("fig%d.png", i) }

// renderPNGs draws the charts for print, wPt points wide, concurrently.
func renderPNGs(figs []figure, wPt float64) ([][]byte, error) {
	out := make([][]byte, len(figs))
	errs := make([]error, len(figs))
	var wg sync.WaitGroup
	for i := range figs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := figs[i]
			out[i], errs[i] = renderPNG(f, wPt, wPt*f.aspect())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pdfWriter lays blocks out on pages, in millimetres.
type pdfWriter struct {
	pdf          *fpdf.Fpdf
	textW, pageH float64
	margin       float64

	// The current font, for text drawn in pieces.
	family, style string
	size          float64

	// The caller's fallback font: nil when none was given or it does not
	// parse; added to the PDF on first use only.
	fallback      func(rune) bool
	fallbackTTF   []byte
	fallbackAdded bool
}

const (
	fontSans     = "sans"
	fontMono     = "mono"
	fontFallback = "fallback"
)

func newPDFWriter(size, title string, fallbackTTF []byte) *pdfWriter {
	pdf := fpdf.New("P", "mm", size, "")
	pdf.AddUTF8FontFromBytes(fontSans, "", liberationsansregular.TTF)
	pdf.AddUTF8FontFromBytes(fontSans, "B", liberationsansbold.TTF)
	pdf.AddUTF8FontFromBytes(fontMono, "", liberationmonoregular.TTF)
	const margin = 18
	pdf.SetMargins(margin, margin, margin)
	pdf.SetAutoPageBreak(true, margin)
	pdf.SetTitle(title, true)
	pdf.SetCreator("Niuma", true)
	// A fixed date keeps the bytes of a report a function of its model.
	pdf.SetCreationDate(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	pdf.SetCatalogSort(true)
	pdf.AliasNbPages("{nb}")
	pw, ph := pdf.GetPageSize()
	w := &pdfWriter{pdf: pdf, textW: pw - 2*margin, pageH: ph, margin: margin}
	if len(fallbackTTF) > 0 {
		if f, err := sfnt.Parse(fallbackTTF); err == nil {
			w.fallback, w.fallbackTTF = glyphCheck(f), fallbackTTF
		}
	}
	pdf.SetFooterFunc(func() {
		family, style, size := w.family, w.style, w.size
		defer func() { w.family, w.style, w.size = family, style, size }()
		pdf.SetY(-12)
		w.setFont(fontSans, "", 8)
		pdf.SetTextColor(0x59, 0x63, 0x6e)
		w.line(w.textW*0.8, 5, title, "", 0, "L", false)
		pdf.CellFormat(w.textW*0.2, 5, fmt.Sprintf("%d / {nb}", pdf.PageNo()), "", 0, "R", false, 0, "")
	})
	return w
}

func (w *pdfWriter) ink()   { w.pdf.SetTextColor(0x1f, 0x23, 0x28) }
func (w *pdfWriter) muted() { w.pdf.SetTextColor(0x59, 0x63, 0x6e) }

// room starts a new page unless h millimetres still fit on this one.
func (w *pdfWriter) room(h float64) bool {
	if w.pdf.GetY()+h > w.pageH-w.margin {
		w.pdf.AddPage()
		return true
	}
	return false
}

func (w *pdfWriter) write(o *outline) {
	pdf := w.pdf
	pdf.AddPage()
	w.ink()
	w.setFont(fontSans, "B", 17)
	w.para(w.textW, 8, o.title, false)
	if o.subtitle != "" {
		w.muted()
		w.setFont(fontSans, "", 9)
		w.para(w.textW, 5, o.subtitle, false)
	}
	pdf.Ln(2)
	for i, b := range o.blocks {
		switch b.kind {
		case bHeading:
			var next *figure
			if i+1 < len(o.blocks) && o.blocks[i+1].kind == bFigure {
				next = &o.figs[o.blocks[i+1].fig]
			}
			w.heading(b, next)
		case bPara:
			w.ink()
			w.setFont(fontSans, "", 9.5)
			w.para(w.textW, 4.8, b.text, false)
			pdf.Ln(1)
		case bFacts:
			w.facts(b.facts)
		case bTable:
			w.table(b)
		case bFigure:
			w.figure(o.figs[b.fig], b.fig)
		case bPre:
			w.pre(b.lines)
		}
	}
}

func (w *pdfWriter) heading(b block, next *figure) {
	pdf := w.pdf
	// Keep a heading with the start of what follows it.
	need := 22.0
	if next != nil {
		need = 10 + w.textW*next.aspect()
	}
	w.room(need)
	w.ink()
	if b.level == 2 {
		pdf.Ln(4)
		w.setFont(fontSans, "B", 12.5)
		w.line(w.textW, 7, b.text, "", 1, "L", false)
		y := pdf.GetY()
		pdf.SetDrawColor(0xd1, 0xd9, 0xe0)
		pdf.SetLineWidth(0.3)
		pdf.Line(w.margin, y, w.margin+w.textW, y)
		pdf.Ln(2)
		return
	}
	pdf.Ln(1.5)
	w.setFont(fontSans, "B", 10)
	w.para(w.textW, 5.5, b.text, false)
}

func (w *pdfWriter) facts(items []Item) {
	pdf := w.pdf
	labelW := 26.0
	for _, it := range items {
		w.room(5)
		w.setFont(fontSans, "", 9.5)
		w.muted()
		x := pdf.GetX()
		w.line(labelW, 4.8, it.Label, "", 0, "L", false)
		w.ink()
		pdf.SetX(x + labelW)
		w.para(w.textW-labelW, 4.8, it.Value, false)
	}
	pdf.Ln(1)
}

// table draws a table whose columns share the text width in proportion to
// their content; cells that do not fit are cut with an ellipsis. The
// header repeats on every page.
func (w *pdfWriter) table(b block) {
	pdf := w.pdf
	fontSize := 8.5
	if len(b.head) > 7 {
		fontSize = 7.5
	}
	w.setFont(fontSans, "", fontSize)
	n := len(b.head)
	want := make([]float64, n)
	measure := func(i int, s string, bold bool) {
		if bold {
			w.setFont(fontSans, "B", fontSize)
			defer w.setFont(fontSans, "", fontSize)
		}
		want[i] = max(want[i], w.width(s)+3)
	}
	for i, h := range b.head {
		measure(i, h, true)
	}
	sample := b.rows
	if len(sample) > 200 { // widths from the first rows keep a long table quick
		sample = sample[:200]
	}
	for _, r := range sample {
		for i := 0; i < n && i < len(r); i++ {
			measure(i, r[i], false)
		}
	}
	widths := fitWidths(want, w.textW)
	if last := n - 1; !(last < len(b.num) && b.num[last]) {
		// A text column last (a note, a value) takes the rest of the line.
		sum := 0.0
		for _, v := range widths {
			sum += v
		}
		widths[last] += max(0, w.textW-sum)
	}
	const rowH = 5.2
	header := func() {
		w.setFont(fontSans, "B", fontSize)
		w.ink()
		for i, h := range b.head {
			w.line(widths[i], rowH, h, "B", 0, align(b, i), false)
		}
		pdf.Ln(-1)
		w.setFont(fontSans, "", fontSize)
	}
	w.room(rowH * 3)
	pdf.SetDrawColor(0xd1, 0xd9, 0xe0)
	pdf.SetLineWidth(0.25)
	header()
	for ri, r := range b.rows {
		if w.room(rowH) {
			header()
		}
		pdf.SetFillColor(0xf6, 0xf8, 0xfa)
		for i := 0; i < n; i++ {
			cell := ""
			if i < len(r) {
				cell = r[i]
			}
			w.stateColor(cell)
			w.line(widths[i], rowH, cell, "", 0, align(b, i), ri%2 == 1)
		}
		pdf.Ln(-1)
	}
	w.ink()
	pdf.Ln(2)
}

func (w *pdfWriter) stateColor(cell string) {
	switch cell {
	case "succeeded":
		w.pdf.SetTextColor(0x1a, 0x7f, 0x37)
	case "failed":
		w.pdf.SetTextColor(0xcf, 0x22, 0x2e)
	case "cancelled", "pruned":
		w.pdf.SetTextColor(0x9a, 0x67, 0x00)
	default:
		w.ink()
	}
}

func align(b block, i int) string {
	if i < len(b.num) && b.num[i] {
		return "R"
	}
	return "L"
}

// fitWidths shares total between columns: each gets what it wants when
// all fit, else the narrow ones keep theirs and the wide ones share the
// rest in proportion.
func fitWidths(want []float64, total float64) []float64 {
	out := make([]float64, len(want))
	sum := 0.0
	for _, v := range want {
		sum += v
	}
	if sum <= total {
		copy(out, want)
		return out
	}
	fair := total / float64(len(want))
	narrow, wide := 0.0, 0.0
	for _, v := range want {
		if v <= fair {
			narrow += v
		} else {
			wide += v
		}
	}
	for i, v := range want {
		if v <= fair {
			out[i] = v
		} else {
			out[i] = v / wide * (total - narrow)
		}
	}
	return out
}

func (w *pdfWriter) figure(f figure, i int) {
	pdf := w.pdf
	h := w.textW * f.aspect()
	w.room(h + 6)
	y := pdf.GetY()
	pdf.ImageOptions(figName(i), w.margin, y, w.textW, h, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	pdf.SetY(y + h + 1)
	if f.Caption != "" {
		w.muted()
		w.setFont(fontSans, "", 8.5)
		w.para(w.textW, 4.2, f.Caption, false)
	}
	pdf.Ln(2)
}

func (w *pdfWriter) pre(lines []string) {
	pdf := w.pdf
	w.setFont(fontMono, "", 7.5)
	pdf.SetFillColor(0xf6, 0xf8, 0xfa)
	w.ink()
	for _, l := range lines {
		w.room(3.6)
		w.para(w.textW, 3.6, strings.ReplaceAll(l, "\t", "    "), true)
	}
	pdf.Ln(2)
}

// The text layer. Text is drawn in Liberation Sans (or Mono for logs);
// a string with characters Liberation lacks but the caller's fallback font
// has (Chinese, with Options.FallbackFont) is drawn in pieces, each in the
// font that has it. Characters neither font has become "?".

// setFont selects a font and remembers it, so that mixed text can return
// to it after a piece in the fallback font.
func (w *pdfWriter) setFont(family, style string, size float64) {
	w.family, w.style, w.size = family, style, size
	w.pdf.SetFont(family, style, size)
}

// span is a piece of a string drawn in one font.
type span struct {
	text     string
	fallback bool
}

// spans splits s by font. It returns nil when s needs only the main font
// (after pdfText), which is every string when there is no fallback font.
func (w *pdfWriter) spans(s string) []span {
	if w.fallback == nil {
		return nil
	}
	has := coverage()
	need := false
	for _, r := range s {
		if !has(r) && w.fallback(r) {
			need = true
			break
		}
	}
	if !need {
		return nil
	}
	var out []span
	var cur strings.Builder
	curFB := false
	for _, r := range s {
		fb := !has(r) && w.fallback(r)
		if fb != curFB && cur.Len() > 0 {
			out = append(out, span{cur.String(), curFB})
			cur.Reset()
		}
		curFB = fb
		switch {
		case fb || has(r):
			cur.WriteRune(r)
		case r == '\t':
			cur.WriteByte(' ')
		default:
			cur.WriteByte('?')
		}
	}
	if cur.Len() > 0 {
		out = append(out, span{cur.String(), curFB})
	}
	if !w.fallbackAdded {
		w.pdf.AddUTF8FontFromBytes(fontFallback, "", w.fallbackTTF)
		w.fallbackAdded = true
	}
	return out
}

// useSpan selects the font of a span.
func (w *pdfWriter) useSpan(sp span) {
	if sp.fallback {
		w.pdf.SetFont(fontFallback, "", w.size)
	} else {
		w.pdf.SetFont(w.family, w.style, w.size)
	}
}

// width is how wide s is drawn in the current font, in mm.
func (w *pdfWriter) width(s string) float64 {
	sps := w.spans(s)
	if sps == nil {
		return w.pdf.GetStringWidth(pdfText(s))
	}
	total := 0.0
	for _, sp := range sps {
		w.useSpan(sp)
		total += w.pdf.GetStringWidth(sp.text)
	}
	w.pdf.SetFont(w.family, w.style, w.size)
	return total
}

// fit cuts s with an ellipsis so that it is at most width mm wide.
func (w *pdfWriter) fit(s string, width float64) string {
	if w.width(s) <= width {
		return s
	}
	r := []rune(s)
	lo, hi := 0, len(r)
	for lo < hi { // the longest prefix that fits with "…"
		mid := (lo + hi + 1) / 2
		if w.width(string(r[:mid])+"…") <= width {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return string(r[:lo]) + "…"
}

// line draws s on one line in a cell, cut to fit, like fpdf's CellFormat.
func (w *pdfWriter) line(width, h float64, s, border string, ln int, align string, fill bool) {
	pdf := w.pdf
	s = w.fit(s, width-1)
	sps := w.spans(s)
	if sps == nil {
		pdf.CellFormat(width, h, pdfText(s), border, ln, align, fill, 0, "")
		return
	}
	x, y := pdf.GetXY()
	pdf.CellFormat(width, h, "", border, 0, "", fill, 0, "") // frame and fill
	tw := w.width(s)
	cm := pdf.GetCellMargin()
	tx := x + cm
	if align == "R" {
		tx = x + width - cm - tw
	}
	_, fontH := pdf.GetFontSize()
	base := y + h/2 + 0.3*fontH // where fpdf puts a cell's baseline
	for _, sp := range sps {
		w.useSpan(sp)
		pdf.Text(tx, base, sp.text)
		tx += pdf.GetStringWidth(sp.text)
	}
	pdf.SetFont(w.family, w.style, w.size)
	switch ln {
	case 1:
		pdf.SetXY(pdf.GetX(), y+h)
		pdf.SetX(w.margin)
	case 2:
		pdf.SetXY(x, y+h)
	}
}

// para draws s wrapped to width from the current position, like fpdf's
// MultiCell (mixed-font text is not filled).
func (w *pdfWriter) para(width, h float64, s string, fill bool) {
	pdf := w.pdf
	sps := w.spans(s)
	if sps == nil {
		pdf.MultiCell(width, h, pdfText(s), "", "L", fill)
		return
	}
	x := pdf.GetX()
	left, top, right, _ := pdf.GetMargins()
	pw, _ := pdf.GetPageSize()
	pdf.SetLeftMargin(x)
	pdf.SetRightMargin(pw - x - width)
	for _, sp := range sps {
		w.useSpan(sp)
		pdf.Write(h, sp.text)
	}
	pdf.SetFont(w.family, w.style, w.size)
	pdf.Ln(h)
	pdf.SetMargins(left, top, right)
	pdf.SetX(left)
}

// coverage records which runes the embedded fonts can draw.
var coverage = sync.OnceValue(func() func(rune) bool {
	var fonts []*sfnt.Font
	for _, ttf := range [][]byte{liberationsansregular.TTF, liberationmonoregular.TTF} {
		if f, err := sfnt.Parse(ttf); err == nil {
			fonts = append(fonts, f)
		}
	}
	return glyphCheck(fonts...)
})

// glyphCheck returns whether every one of fonts has a glyph for a rune.
// Control characters never count as drawable.
func glyphCheck(fonts ...*sfnt.Font) func(rune) bool {
	var mu sync.Mutex
	var buf sfnt.Buffer
	cache := map[rune]bool{}
	return func(r rune) bool {
		if r == '\n' {
			return true // MultiCell breaks the line
		}
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return false
		}
		if r < 0x7f {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if ok, seen := cache[r]; seen {
			return ok
		}
		ok := len(fonts) > 0
		for _, f := range fonts {
			if i, err := f.GlyphIndex(&buf, r); err != nil || i == 0 {
				ok = false
			}
		}
		cache[r] = ok
		return ok
	}
}

// pdfText replaces what the embedded fonts cannot draw (CJK, emoji,
// control characters) with "?", so that no text can break the PDF.
func pdfText(s string) string {
	has := coverage()
	clean := true
	for _, r := range s {
		if !has(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case has(r):
			b.WriteRune(r)
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}
