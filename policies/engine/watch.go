package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/openclaw-go/openclaw/policies/builtin"
)

// Watch reloads the engine whenever the policy file or a module file
// changes, until ctx is done; it then returns nil. It watches the folders
// that hold those files (so a file replaced by a rename, as editors and
// deploy tools do, or through a symlink swap, is seen too) and reloads
// once the events have been quiet for Options.WatchDebounce; a reload
// that finds nothing changed changes nothing. A reload that fails leaves the active
// policies in place and is logged with its reason (see [Engine.Reload]);
// the next change is tried again. Folders of modules added by a reload are
// watched from then on. It returns an error only when the watcher cannot
// start. One Watch per engine.
func (e *Engine) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("engine: watching policy files: %w", err)
	}
	defer w.Close()
	files := map[string]bool{}
	dirs := map[string]bool{}
	track := func() {
		for _, f := range e.watchedFiles() {
			files[f] = true
			d := filepath.Dir(f)
			if dirs[d] {
				continue
			}
			if err := w.Add(d); err != nil {
				e.logger.Warn("cannot watch a policy folder; use `openclaw policy reload` after changes", "dir", d, "err", err)
				continue
			}
			dirs[d] = true
		}
	}
	track()

	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !relevant(ev, files) {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(e.opts.WatchDebounce)
			} else {
				timer.Reset(e.opts.WatchDebounce)
			}
			fire = timer.C
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			e.logger.Warn("policy file watcher", "err", err)
		case <-fire:
			fire = nil
			if _, err := e.Reload(ctx); err == ErrClosed {
				return nil
			}
			track()
		}
	}
}

// relevant reports whether ev may have changed a watched file: any change
// of the file itself, or an entry created, renamed or removed in its
// folder, which is how a symlink swap (a Kubernetes ConfigMap's "..data")
// replaces a file without touching its name. Writes to other files of the
// folder (an audit log next to the modules) are ignored.
func relevant(ev fsnotify.Event, files map[string]bool) bool {
	if files[filepath.Clean(ev.Name)] {
		return ev.Op != fsnotify.Chmod
	}
	return ev.Op.Has(fsnotify.Create) || ev.Op.Has(fsnotify.Rename) || ev.Op.Has(fsnotify.Remove)
}

// watchedFiles returns the absolute paths of the policy file and of every
// module file of the current set and of the configured --policy files.
func (e *Engine) watchedFiles() []string {
	var out []string
	add := func(p string) {
		if p == "" || builtin.IsRef(p) {
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, filepath.Clean(abs))
		}
	}
	add(e.opts.ConfigFile)
	for _, f := range e.opts.Files {
		add(f)
	}
	for _, m := range e.Modules() {
		add(m.Source)
	}
	return out
}
