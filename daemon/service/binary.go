package service

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The service runs a binary at a fixed place that root owns, never the file that ran install:
// `sudo ./bin/tfd install` would have root's service manager start, at every boot, a file its
// builder can rewrite, and `sudo go run ./cmd/tfd install` would point it at a build that go run
// deletes when it exits. Install copies the running binary to that place instead.

// installedBinary is where Install puts tfd when no package manager put it in place.
const installedBinary = "/usr/local/bin/tfd"

// serviceBinary returns the binary the service on goos runs, and the file Install copies there
// (empty when running already is that binary). On macOS a tfd that Homebrew installed stays
// where Homebrew keeps it, run through the prefix's bin/tfd link, so `brew upgrade` updates the
// service's binary too. Everywhere else it is /usr/local/bin/tfd; on Linux even for Homebrew on
// Linux, whose prefix lies under /home, which the unit hides from the service (ProtectHome).
func serviceBinary(goos, running string) (exe, source string) {
	if goos == "darwin" {
		for _, prefix := range []string{"/opt/homebrew", "/usr/local"} {
			if strings.HasPrefix(running, prefix+"/Cellar/") || running == prefix+"/bin/tfd" {
				return prefix + "/bin/tfd", ""
			}
		}
	}
	if running == installedBinary {
		return installedBinary, ""
	}
	return installedBinary, running
}

// checkSource refuses to install from a temporary folder: go run builds tfd under
// os.TempDir()/go-build… (or GOTMPDIR) and deletes it when it exits, and whatever else lies in
// the temporary folder may be cleaned away before the next boot.
func (m *Manager) checkSource() error {
	src := m.Paths.Source
	if src == "" || !temporaryBuild(src, cmp.Or(m.TempDir, os.TempDir())) {
		return nil
	}
	return fmt.Errorf("service: %s is a temporary build (go run makes one and deletes it when it exits), so the service would lose its binary: build tfd with make build (or go build -o bin/tfd ./cmd/tfd) and run sudo bin/tfd install", src)
}

// temporaryBuild reports whether path is go run's build (a go-build… folder on its way) or lies
// in tempDir. Both sides are compared with their symlinks resolved too, since macOS's /tmp and
// $TMPDIR are links into /private.
func temporaryBuild(path, tempDir string) bool {
	paths := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		paths = append(paths, real)
	}
	dirs := []string{filepath.Clean(tempDir)}
	if real, err := filepath.EvalSymlinks(tempDir); err == nil {
		dirs = append(dirs, real)
	}
	for _, p := range paths {
		for _, el := range strings.Split(filepath.ToSlash(p), "/") {
			if strings.HasPrefix(el, "go-build") {
				return true
			}
		}
		for _, d := range dirs {
			if rel, err := filepath.Rel(d, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return true
			}
		}
	}
	return false
}

// installBinary copies Paths.Source to Paths.Executable, owned by root and mode 0755. The copy
// is atomic: written and synced beside the target, then renamed over it, so a running service
// keeps its old file and the next start finds a whole new one, never half of it.
func (m *Manager) installBinary(ctx context.Context) error {
	src, dst := m.Paths.Source, m.Paths.Executable
	if src == "" {
		fmt.Fprintf(m.Out, "the service runs %s\n", dst)
		return nil
	}
	if err := m.copyBinary(ctx, src, dst); err != nil {
		return fmt.Errorf("service: copy %s to %s: %w", src, dst, err)
	}
	fmt.Fprintf(m.Out, "copied %s to %s; the service runs that copy\n", src, dst)
	return nil
}

func (m *Manager) copyBinary(ctx context.Context, src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	if err := mkdirMode(dir, 0o755, false); err != nil {
		return err
	}
	// A fixed name, so an interrupted install leaves one stray file, not many, and the next
	// install replaces it.
	tmp := filepath.Join(dir, ".tfd.install")
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return err
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(out, in); err != nil {
		return err
	}
	if err = out.Sync(); err != nil {
		return err
	}
	// Root's own group is wheel or root, but a new file on macOS takes its folder's group
	// (admin, for a /usr/local/bin that Homebrew made): set both before the file is visible.
	if _, err = m.Runner.Run(ctx, "chown", "0:0", tmp); err != nil {
		return err
	}
	if err = out.Chmod(0o755); err != nil {
		return err
	}
	if err = out.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
