package ui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// MetricsServer serves the engine's state to Prometheus from the window
// (the exporter of `niuma engine --metrics-addr`); the Settings page starts,
// moves and stops it.
type MetricsServer interface {
	// Serve stops what it served before and, for a non-empty addr, serves
	// /metrics there. It returns the address it listens on ("" when
	// stopped), or why it cannot listen.
	Serve(addr string) (string, error)
}

// prefMetricsAddr is the preference with the address the window serves
// Prometheus metrics on ("" or unset: it does not).
const prefMetricsAddr = "metrics.addr"

// defaultMetricsAddr is the address offered when none was chosen yet.
const defaultMetricsAddr = "127.0.0.1:9464"

// metricsSetting is the Settings page's Prometheus section.
type metricsSetting struct {
	server  MetricsServer
	addr    *keyEntry
	serve   *widget.Button
	stop    *widget.Button
	status  *widget.Label
	content fyne.CanvasObject
	serving string // the address served now
}

func newMetricsSetting(server MetricsServer) *metricsSetting {
	m := &metricsSetting{server: server, addr: newKeyEntry(), status: widget.NewLabel("")}
	m.addr.SetPlaceHolder(defaultMetricsAddr)
	m.addr.OnSubmitted = func(string) { m.apply() }
	m.status.Wrapping = fyne.TextWrapWord
	m.serve = widget.NewButton("Serve", m.apply)
	m.stop = widget.NewButton("Stop", func() { m.set("") })
	row := container.NewBorder(nil, nil, widget.NewLabel("Address"), container.NewHBox(m.serve, m.stop), m.addr)
	hint := widget.NewLabel("Prometheus scrapes http://ADDRESS/metrics: GPUs, the queue, runs by state, anomalies " +
		"(docs/guide/prometheus.md). Use 0.0.0.0:PORT to let another machine scrape it.")
	hint.Importance = widget.LowImportance
	hint.Wrapping = fyne.TextWrapWord
	m.content = container.NewVBox(widget.NewLabelWithStyle("Prometheus metrics", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		row, m.status, hint)
	m.show(nil)
	return m
}

// apply serves on the typed address (the default when empty).
func (m *metricsSetting) apply() {
	addr := strings.TrimSpace(m.addr.Text)
	if addr == "" {
		addr = defaultMetricsAddr
	}
	m.set(addr)
}

// set serves on addr ("" stops) and remembers the choice for next time.
func (m *metricsSetting) set(addr string) {
	at, err := m.server.Serve(addr)
	if err != nil {
		m.serving = ""
		m.show(fmt.Errorf("could not serve on %s: %w. Pick another port (e.g. 127.0.0.1:9465) and press Serve", addr, err))
		return
	}
	m.serving = at
	if app := fyne.CurrentApp(); app != nil {
		app.Preferences().SetString(prefMetricsAddr, addr)
	}
	if addr != "" {
		m.addr.SetText(addr)
	}
	m.show(nil)
}

// start serves on the address the environment names, else on the one
// chosen last time, if any.
func (m *metricsSetting) start(env string) {
	addr := env
	if addr == "" {
		if app := fyne.CurrentApp(); app != nil {
			addr = app.Preferences().String(prefMetricsAddr)
		}
	}
	if addr == "" {
		m.show(nil)
		return
	}
	m.addr.SetText(addr)
	m.set(addr)
}

func (m *metricsSetting) show(err error) {
	switch {
	case err != nil:
		m.status.Importance = widget.DangerImportance
		m.status.SetText(err.Error())
	case m.serving != "":
		m.status.Importance = widget.SuccessImportance
		m.status.SetText("Serving http://" + m.serving + "/metrics")
	default:
		m.status.Importance = widget.LowImportance
		m.status.SetText("Not serving. Type an address and press Serve (or Enter).")
	}
	if m.serving != "" {
		m.stop.Enable()
	} else {
		m.stop.Disable()
	}
}
