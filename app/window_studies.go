//go:build !nowindow

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"niuma/engine"
	"niuma/engine/study"
	"niuma/engine/template"
	"niuma/printable"
	"niuma/storage"
)

// studyDrivers drives studies from the window's process, as
// `niuma tune --resume ID --wait` would: each under the study's lock, so
// that no other niuma drives it at the same time, until it ends or the
// window closes (ctx). A study left running when the window closes keeps
// its state in the database: the next window carries it on (resume), or
// `niuma tune --resume ID` does.
type studyDrivers struct {
	ctx    context.Context
	eng    *engine.Engine
	db     *storage.DB
	home   string
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool // wait has begun: no driver starts any more
}

// start drives study id (of template t) in the background; an error says
// why it cannot be driven here (another niuma drives it, or its template
// changed).
func (d *studyDrivers) start(id string, t *template.Template) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errors.New("the window is closing")
	}
	d.wg.Add(1) // before wait can begin, so that it waits for this driver
	d.mu.Unlock()
	l, unlock, err := loadStudyLocked(d.ctx, d.db, d.home, id, t)
	if err != nil {
		d.wg.Done()
		return err
	}
	logf, err := os.OpenFile(studyLog(d.home, id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		unlock()
		d.wg.Done()
		return err
	}
	go func() {
		defer d.wg.Done()
		defer unlock()
		defer logf.Close()
		say := func(line string) {
			fmt.Fprintf(logf, "%s %s\n", time.Now().Format("15:04:05"), printable.String(line))
		}
		drv := &study.Driver{Engine: d.eng, Store: d.db, Say: say}
		start := time.Now()
		res, err := drv.Drive(d.ctx, l)
		switch {
		case errors.Is(err, context.Canceled):
			say(fmt.Sprintf("the window closed; the next window, or `niuma tune --resume %s`, carries study %s on", id, id))
		case err != nil:
			say("the study stopped: " + err.Error())
		default:
			summarise(logf, res, time.Since(start))
		}
	}()
	return nil
}

// resume drives every running study that no other niuma drives: those a
// window or a driver left when it closed or was killed. It returns the IDs
// it took on.
func (d *studyDrivers) resume() ([]string, error) {
	all, err := d.db.ListStudies(d.ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, st := range all {
		if st.State != storage.StudyRunning {
			continue
		}
		t, err := loadTemplate(d.home, st.Template)
		if err != nil {
			continue // the template is gone: `niuma tune --status` says so
		}
		if d.start(st.ID, t) == nil {
			ids = append(ids, st.ID)
		}
	}
	return ids, nil
}

// wait returns once every driver has stopped (after ctx ends); none
// starts after it has begun.
func (d *studyDrivers) wait() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.wg.Wait()
}
