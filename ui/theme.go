package ui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// niumaTheme is the app's look: Fyne's default theme (which follows the
// system's light or dark setting) with Niuma's own accent, calmer
// backgrounds and slightly rounder, roomier widgets.
type niumaTheme struct{ fyne.Theme }

// NewTheme returns Niuma's theme; the app sets it with
// app.Settings().SetTheme. Light or dark follows the system.
func NewTheme() fyne.Theme { return &niumaTheme{Theme: theme.DefaultTheme()} }

// accent is Niuma's blue, the same as a running run's chip.
var accent = color.NRGBA{R: 0x2d, G: 0x7f, B: 0xf9, A: 0xff}

func (t *niumaTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	dark := v == theme.VariantDark
	switch n {
	case theme.ColorNamePrimary, theme.ColorNameHyperlink:
		return accent
	case theme.ColorNameFocus:
		return color.NRGBA{R: 0x2d, G: 0x7f, B: 0xf9, A: 0x60}
	case theme.ColorNameSelection:
		return color.NRGBA{R: 0x2d, G: 0x7f, B: 0xf9, A: 0x40}
	case theme.ColorNameBackground:
		if dark {
			return color.NRGBA{R: 0x16, G: 0x19, B: 0x1f, A: 0xff}
		}
		return color.NRGBA{R: 0xf4, G: 0xf6, B: 0xf9, A: 0xff}
	case theme.ColorNameHeaderBackground, theme.ColorNameMenuBackground, theme.ColorNameOverlayBackground:
		if dark {
			return color.NRGBA{R: 0x1e, G: 0x22, B: 0x2a, A: 0xff}
		}
		return color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}
	case theme.ColorNameInputBackground:
		// Also the slider's track: it must stand out from the background.
		if dark {
			return color.NRGBA{R: 0x2b, G: 0x31, B: 0x3c, A: 0xff}
		}
		return color.NRGBA{R: 0xe6, G: 0xea, B: 0xf0, A: 0xff}
	case theme.ColorNameDisabled:
		// Secondary text (help lines, IDs) uses this; the default is too
		// faint to read on the dark background.
		if dark {
			return color.NRGBA{R: 0x8b, G: 0x93, B: 0xa1, A: 0xff}
		}
		return color.NRGBA{R: 0x76, G: 0x7d, B: 0x88, A: 0xff}
	case colorNameCard:
		if dark {
			return color.NRGBA{R: 0x22, G: 0x27, B: 0x30, A: 0xff}
		}
		return color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}
	case colorNameTrack:
		if dark {
			return color.NRGBA{R: 0x34, G: 0x3a, B: 0x46, A: 0xff}
		}
		return color.NRGBA{R: 0xe3, G: 0xe7, B: 0xee, A: 0xff}
	}
	return t.Theme.Color(n, v)
}

func (t *niumaTheme) Size(n fyne.ThemeSizeName) float32 {
	switch n {
	case theme.SizeNameInputRadius, theme.SizeNameSelectionRadius:
		return 6
	}
	return t.Theme.Size(n)
}

// Colours the theme adds for the board's cards and bars; under another
// theme they fall back to that theme's colours via themeColor.
const (
	colorNameCard  fyne.ThemeColorName = "niuma-card"
	colorNameTrack fyne.ThemeColorName = "niuma-track"
)

// themeColor looks a colour up in the current app's theme; under a theme
// other than Niuma's, its own names map to the nearest standard colour.
func themeColor(n fyne.ThemeColorName) color.Color {
	app := fyne.CurrentApp()
	if app == nil {
		return color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	}
	th := app.Settings().Theme()
	if _, ours := th.(*niumaTheme); ours {
		return th.Color(n, app.Settings().ThemeVariant())
	}
	// Another theme (tests, a user's override) does not know Niuma's names.
	switch n {
	case colorNameCard:
		return theme.Color(theme.ColorNameInputBackground)
	case colorNameTrack:
		return theme.Color(theme.ColorNameDisabledButton)
	}
	return theme.Color(n)
}

// isDark reports whether the window is drawn in the dark variant.
func isDark() bool {
	app := fyne.CurrentApp()
	return app != nil && app.Settings().ThemeVariant() == theme.VariantDark
}
