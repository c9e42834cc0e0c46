package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// defaultDebounce is how long the watched files must be quiet before a reload: editors write a
// file in several steps (a temporary file, a rename, a chmod), and one reload should see the end.
const defaultDebounce = 200 * time.Millisecond

// rearmDelay is how long the watcher waits before watching again after an error; absentDelay,
// before looking again for a config folder that does not exist (yet).
const (
	rearmDelay  = time.Second
	absentDelay = 5 * time.Second
)

// watch reloads the config each time its file or the API keys file in force changes, until ctx
// ends. It watches the folders rather than the files: editors replace files by rename (vim moves
// the old one away and writes a new one), and a watch on the file itself would stop at the first
// such save. It follows symlinks: the link's folder (to see the link swapped) and the target's
// (to see the target edited), resolving the links again after every change. Events for other
// names are ignored. After an error it starts over; while a watched file's folder does not exist
// it looks for it every few seconds. It calls armed once, when the first watch is in place (or
// failed to be), so that edits made after Run reports ready are seen.
func (s *server) watch(ctx context.Context, armed func()) {
	if len(s.watchedFiles()) == 0 {
		armed()
		return
	}
	debounce := s.opts.Debounce
	if debounce <= 0 {
		debounce = defaultDebounce
	}
	absentSaid := false
	for rearmed := false; ; rearmed = true {
		err := s.watchOnce(ctx, debounce, rearmed, armed)
		if ctx.Err() != nil {
			return
		}
		delay := rearmDelay
		switch {
		case errors.Is(err, fs.ErrNotExist):
			delay = absentDelay
			if !absentSaid {
				s.logger.Info("a watched file's folder does not exist; tfd watches for it", "files", s.watchedFiles(), "err", err)
				absentSaid = true
			}
		default:
			s.logger.Warn("config watch failed; watching again", "files", s.watchedFiles(), "err", err, "in", delay)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// watchedFiles returns the files whose edits reload the config: the config file and the API
// keys file in force, those that are set. A reload may change the second.
func (s *server) watchedFiles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var files []string
	for _, f := range []string{s.src.File, s.cfg.Server.APIKeysFile} {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// watchOnce runs one fsnotify watcher until ctx ends or the watcher fails. With catchUp set (a
// watch started again after an error) it reloads once at the start, for edits made while no
// watch was in place.
func (s *server) watchOnce(ctx context.Context, debounce time.Duration, catchUp bool, armed func()) error {
	defer armed()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	names, err := rewatch(w, s.watchedFiles())
	if err != nil {
		return err
	}
	armed()
	s.logger.Debug("watching the config", "files", s.watchedFiles(), "names", names)
	// watchKeys adds a keys file that a reload is about to put in force to the watch. An error
	// here shows again in the rewatch after the reload, which starts the watch over.
	watchKeys := func(keysFile string) { rewatch(w, append(s.watchedFiles(), keysFile)) }
	if catchUp {
		s.reload(ctx, watchKeys)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("the watcher closed")
			}
			return err
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("the watcher closed")
			}
			if slices.Contains(names, filepath.Clean(ev.Name)) {
				timer.Reset(debounce)
			}
		case <-timer.C:
			if _, err = rewatch(w, s.watchedFiles()); err != nil {
				return err
			}
			s.reload(ctx, watchKeys)
			// The reload may have named another keys file: its events count from now on.
			if names, err = rewatch(w, s.watchedFiles()); err != nil {
				return err
			}
		}
	}
}

// rewatch resolves the symlinks of paths and makes w watch the folder of every name on the way
// (each link, each link it points to, each final file); it returns those names. Folders watched
// for names no longer on the way are dropped.
func rewatch(w *fsnotify.Watcher, paths []string) ([]string, error) {
	var names []string
	want := map[string]bool{}
	own := map[string]bool{} // the folders of paths themselves, which must exist
	for _, p := range paths {
		chain := linkChain(p)
		names = append(names, chain...)
		for _, n := range chain {
			want[filepath.Dir(n)] = true
		}
		own[filepath.Dir(filepath.Clean(p))] = true
	}
	for _, d := range w.WatchList() {
		if !want[d] {
			w.Remove(d)
		}
	}
	for d := range want {
		if slices.Contains(w.WatchList(), d) {
			continue
		}
		if err := w.Add(d); err != nil {
			if errors.Is(err, fs.ErrNotExist) && !own[d] {
				continue // a dangling link's target folder; the link's own folder still tells
			}
			return nil, err
		}
	}
	return names, nil
}

// linkChain returns path and, while the name is a symlink, the name it points to, all cleaned
// and absolute where path is. It stops after 40 links, as the kernel does.
func linkChain(path string) []string {
	names := []string{filepath.Clean(path)}
	for range 40 {
		cur := names[len(names)-1]
		info, err := os.Lstat(cur)
		if err != nil || info.Mode()&fs.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(cur)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(cur), target)
		}
		names = append(names, filepath.Clean(target))
	}
	return names
}
