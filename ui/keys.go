package ui

import (
	"slices"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// Keyboard in dialogs: Escape cancels and Enter confirms in every dialog
// and wizard step. Fyne hands a key to the focused widget, or to the
// canvas when nothing has the focus, and its dialogs listen for neither;
// so each open dialog pushes its Enter and Escape on a per-window stack,
// the canvas's key handler answers them when nothing is focused, and the
// focusable widgets the dialogs are made of (the key* types below) pass
// the two keys to the stack before doing their own thing.

// dialogKeys is what one open dialog does on Enter and on Escape (nil:
// nothing).
type dialogKeys struct {
	enter, escape func()
	live          func() bool // nil: until popped; else while it says so
}

type keyStack struct {
	mu    sync.Mutex
	stack []*dialogKeys
	prev  func(*fyne.KeyEvent) // the canvas's handler before ours
}

var (
	keyStacksMu sync.Mutex
	keyStacks   = map[fyne.Canvas]*keyStack{}
)

// pushKeys makes enter and escape answer Enter and Escape on c until pop
// is called (when the dialog closes). The newest dialog answers first.
func pushKeys(c fyne.Canvas, enter, escape func()) (pop func()) {
	return pushKeysWhile(c, enter, escape, nil)
}

// pushKeysWhile is pushKeys for something that may go away by itself (a
// pop-up a tap outside hides): its keys stand while live says so.
func pushKeysWhile(c fyne.Canvas, enter, escape func(), live func() bool) (pop func()) {
	if c == nil {
		return func() {}
	}
	keyStacksMu.Lock()
	ks := keyStacks[c]
	if ks == nil {
		ks = &keyStack{prev: c.OnTypedKey()}
		keyStacks[c] = ks
		c.SetOnTypedKey(func(ev *fyne.KeyEvent) {
			if routeKey(c, ev) {
				return
			}
			if ks.prev != nil {
				ks.prev(ev)
			}
		})
	}
	keyStacksMu.Unlock()
	k := &dialogKeys{enter: enter, escape: escape, live: live}
	ks.mu.Lock()
	ks.stack = append(ks.stack, k)
	ks.mu.Unlock()
	return func() {
		ks.mu.Lock()
		if i := slices.Index(ks.stack, k); i >= 0 {
			ks.stack = slices.Delete(ks.stack, i, i+1)
		}
		ks.mu.Unlock()
	}
}

// routeKey runs the topmost dialog's answer to Enter or Escape on c; false
// when the key is neither or no dialog is open.
func routeKey(c fyne.Canvas, ev *fyne.KeyEvent) bool {
	if c == nil || ev == nil {
		return false
	}
	keyStacksMu.Lock()
	ks := keyStacks[c]
	keyStacksMu.Unlock()
	if ks == nil {
		return false
	}
	ks.mu.Lock()
	var top *dialogKeys
	for n := len(ks.stack); n > 0; n-- {
		if k := ks.stack[n-1]; k.live == nil || k.live() {
			top = k
			break
		}
		ks.stack = ks.stack[:n-1] // gone by itself
	}
	ks.mu.Unlock()
	if top == nil {
		return false
	}
	var fn func()
	switch ev.Name {
	case fyne.KeyEscape:
		fn = top.escape
	case fyne.KeyReturn, fyne.KeyEnter:
		fn = top.enter
	}
	if fn == nil {
		return false
	}
	fn()
	return true
}

// routeFrom offers a key typed into o to the dialogs of o's window.
func routeFrom(o fyne.CanvasObject, ev *fyne.KeyEvent) bool {
	app := fyne.CurrentApp()
	if app == nil {
		return false
	}
	return routeKey(app.Driver().CanvasForObject(o), ev)
}

// keyEntry is a single-line entry whose Enter and Escape go to its dialog.
type keyEntry struct{ widget.Entry }

func newKeyEntry() *keyEntry {
	e := &keyEntry{}
	e.ExtendBaseWidget(e)
	return e
}

func (e *keyEntry) TypedKey(ev *fyne.KeyEvent) {
	if !e.MultiLine && routeFrom(e, ev) {
		return
	}
	e.Entry.TypedKey(ev)
}

// TypedShortcut passes the window's own shortcuts (Ctrl+N) on to the
// window: Fyne gives a focused widget every shortcut and the window none,
// so a cursor in a search box would otherwise swallow Ctrl+N.
func (e *keyEntry) TypedShortcut(s fyne.Shortcut) {
	if isWindowShortcut(s) {
		if app := fyne.CurrentApp(); app != nil {
			if c, ok := app.Driver().CanvasForObject(e).(fyne.Shortcutable); ok {
				c.TypedShortcut(s)
				return
			}
		}
	}
	e.Entry.TypedShortcut(s)
}

// isWindowShortcut reports whether s is one of the window's shortcuts
// (Shell registers them on the canvas): Ctrl+N, the launch wizard.
func isWindowShortcut(s fyne.Shortcut) bool {
	cs, ok := s.(*desktop.CustomShortcut)
	return ok && cs.KeyName == fyne.KeyN && cs.Modifier == fyne.KeyModifierShortcutDefault
}

// keyCheck is a check box whose Enter and Escape go to its dialog.
type keyCheck struct{ widget.Check }

func newKeyCheck(label string, changed func(bool)) *keyCheck {
	c := &keyCheck{}
	c.Text, c.OnChanged = label, changed
	c.ExtendBaseWidget(c)
	return c
}

func (c *keyCheck) TypedKey(ev *fyne.KeyEvent) {
	if routeFrom(c, ev) {
		return
	}
	c.Check.TypedKey(ev)
}

// keySelect is a drop-down whose Enter and Escape go to its dialog.
type keySelect struct{ widget.Select }

func newKeySelect(options []string, changed func(string)) *keySelect {
	s := &keySelect{}
	s.Options, s.OnChanged = options, changed
	s.ExtendBaseWidget(s)
	return s
}

func (s *keySelect) TypedKey(ev *fyne.KeyEvent) {
	if routeFrom(s, ev) {
		return
	}
	s.Select.TypedKey(ev)
}

// keySlider is a slider whose Enter and Escape go to its dialog.
type keySlider struct{ widget.Slider }

func newKeySlider(lo, hi float64) *keySlider {
	s := &keySlider{}
	s.Min, s.Max, s.Step = lo, hi, 1
	s.Orientation = widget.Horizontal
	s.ExtendBaseWidget(s)
	return s
}

func (s *keySlider) TypedKey(ev *fyne.KeyEvent) {
	if routeFrom(s, ev) {
		return
	}
	s.Slider.TypedKey(ev)
}

// keyButton is a button that Enter presses when it has the focus (Fyne's
// answers Space only) and whose Escape goes to its dialog.
type keyButton struct{ widget.Button }

func (b *keyButton) TypedKey(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeyReturn || ev.Name == fyne.KeyEnter {
		if !b.Disabled() && b.OnTapped != nil {
			b.OnTapped()
		}
		return
	}
	if routeFrom(b, ev) {
		return
	}
	b.Button.TypedKey(ev)
}

// checkSet is a row of check boxes, one per choice (a sweep over a choice
// or a bool), made of keyChecks.
type checkSet struct {
	choices  []string
	checks   []*keyCheck
	box      *fyne.Container
	changed  func([]string)
	Selected []string
	setting  bool
}

func newCheckSet(choices []string, changed func([]string)) *checkSet {
	cs := &checkSet{choices: choices, changed: changed, box: container.NewHBox()}
	for _, ch := range choices {
		c := newKeyCheck(ch, func(bool) { cs.collect() })
		cs.checks = append(cs.checks, c)
		cs.box.Add(c)
	}
	return cs
}

func (cs *checkSet) collect() {
	if cs.setting {
		return
	}
	cs.Selected = nil
	for i, c := range cs.checks {
		if c.Checked {
			cs.Selected = append(cs.Selected, cs.choices[i])
		}
	}
	if cs.changed != nil {
		cs.changed(cs.Selected)
	}
}

// SetSelected ticks exactly the given choices.
func (cs *checkSet) SetSelected(sel []string) {
	cs.setting = true
	for i, c := range cs.checks {
		c.SetChecked(slices.Contains(sel, cs.choices[i]))
	}
	cs.setting = false
	cs.collect()
}

// showConfirm asks a yes/no question in a dialog: Enter says yes,
// Escape no.
func showConfirm(win fyne.Window, title, msg, yes, no string, cb func(bool)) {
	var d *dialog.ConfirmDialog
	answered := false
	answer := func(ok bool) {
		if answered {
			return
		}
		answered = true
		d.Hide()
		cb(ok)
	}
	d = dialog.NewConfirm(title, msg, func(ok bool) {
		if !answered {
			answered = true
			cb(ok)
		}
	}, win)
	d.SetConfirmText(yes)
	d.SetDismissText(no)
	d.SetConfirmImportance(widget.DangerImportance)
	showWithKeys(d, win, func() { answer(true) }, func() { answer(false) })
}

// showError shows an error that Enter or Escape dismisses.
func showError(err error, win fyne.Window) {
	if win == nil {
		return
	}
	d := dialog.NewError(err, win)
	showWithKeys(d, win, d.Hide, d.Hide)
}

// showNotice shows a message that is no error (its title says what
// happened); Enter or Escape dismisses it.
func showNotice(win fyne.Window, title, msg string) {
	if win == nil {
		return
	}
	d := dialog.NewInformation(title, msg, win)
	showWithKeys(d, win, d.Hide, d.Hide)
}

// showWithKeys shows d with Enter and Escape bound until it closes; the
// focus leaves whatever was focused behind the dialog, so that the keys
// reach the dialog.
func showWithKeys(d dialog.Dialog, win fyne.Window, enter, escape func()) {
	showWithKeysUntil(d, win, enter, escape, nil)
}

// showWithKeysUntil is showWithKeys that also calls closed, when set, once
// d has closed (a dialog has one OnClosed, which the keys take).
func showWithKeysUntil(d dialog.Dialog, win fyne.Window, enter, escape, closed func()) {
	if win == nil {
		if closed != nil {
			d.SetOnClosed(closed)
		}
		d.Show()
		return
	}
	pop := pushKeys(win.Canvas(), enter, escape)
	d.SetOnClosed(func() {
		pop()
		if closed != nil {
			closed()
		}
	})
	win.Canvas().Unfocus()
	d.Show()
}
