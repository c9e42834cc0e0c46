// Package service owns tfd's install as a system service: a LaunchDaemon on macOS, a systemd
// unit on Linux. [Manager] installs, uninstalls, starts, stops and restarts it, reports its
// status (asking a running tfd for its own), and follows its log; it writes the plist or unit
// from its templates, copies the binary to a fixed root-owned place, makes the _tfd user and the
// folders it owns, and newsyslog's entry for its log.
//
// kardianos/service v1.3.0 describes the service (its Config with the Option keys, the template
// syntax of its LaunchdConfig and SystemdScript options, its Status), but its own Install writes
// to fixed system folders and drives launchd with the legacy load/unload verbs (reported failing
// on macOS 13+), so tfd writes the files itself, at [Paths], and runs launchctl
// bootstrap/bootout/kickstart and systemctl through a [CommandRunner]. Tests point both at a
// temporary folder and a recorder (servicetest.Runner); no service manager is touched.
//
// The service runs unprivileged: as the _tfd user under launchd (user.go), as a systemd
// DynamicUser in a read-only view of the system under systemd (template.go), and always from a
// root-owned copy of the binary at a fixed place (binary.go).
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"

	kardianos "github.com/kardianos/service"
)

// Service names.
const (
	// launchdLabel is the launchd label, and the plist's name in /Library/LaunchDaemons.
	launchdLabel = "dev.tfd.tfd"
	// systemdUnit is the systemd unit's name.
	systemdUnit = "tfd.service"
	// serviceUser is the macOS account (and group) the LaunchDaemon runs as: Install makes it
	// with dscl, Uninstall removes it. systemd makes its own user for the unit at each start
	// (DynamicUser), named after the unit.
	serviceUser = "_tfd"
	// serviceStopSeconds is how long the service manager waits after SIGTERM before it kills
	// tfd: server.shutdown_timeout's default (10 s) for running replies, plus time to free the
	// model, with room to spare. Install warns when the config asks for longer.
	serviceStopSeconds = 30
)

// Platform is the service manager tfd installs into.
type Platform int

// The platforms.
const (
	Launchd Platform = iota + 1 // macOS
	Systemd                     // Linux
)

func (p Platform) String() string {
	switch p {
	case Launchd:
		return "launchd"
	case Systemd:
		return "systemd"
	}
	return fmt.Sprintf("Platform(%d)", int(p))
}

// PlatformFor returns the service manager of goos, or an error naming the ones tfd supports.
func PlatformFor(goos string) (Platform, error) {
	switch goos {
	case "darwin":
		return Launchd, nil
	case "linux":
		return Systemd, nil
	}
	return 0, fmt.Errorf("service: tfd installs as a service on macOS (launchd) and Linux (systemd), not on %s: run tfd serve under your own supervisor", goos)
}

// Manager installs, controls and reports on tfd's service. Its fields are the whole of
// what it touches; it keeps no other state.
type Manager struct {
	Platform Platform
	Paths    Paths
	Runner   CommandRunner
	// DefaultConfig is the documented default tfd.toml that Install writes where none exists.
	DefaultConfig []byte
	// Out receives what each command tells the user.
	Out io.Writer
	// Client asks a running tfd for its health and status; nil: a client with a 1-second
	// timeout, since a tfd on this machine answers at once or not at all.
	Client *http.Client
	// TempDir is the temporary folder whose binaries Install refuses to copy (go run builds
	// there and deletes the build when it exits); empty: os.TempDir(). Tests set it, since
	// their own files live under os.TempDir().
	TempDir string
}

// kardianosConfig returns the service as kardianos/service describes it: the name, the program
// and its arguments, and the options tfd relies on, with its plist or unit template. Under
// launchd tfd writes its own log (--log-file), so that it can follow newsyslog's rotation.
func (m *Manager) kardianosConfig() *kardianos.Config {
	name, tmplKey, tmpl := launchdLabel, "LaunchdConfig", launchdTemplate
	args := []string{"serve", "--config", m.Paths.ConfigFile()}
	user := ""
	if m.Platform == Systemd {
		name, tmplKey, tmpl = "tfd", "SystemdScript", systemdTemplate
	} else {
		args = append(args, "--log-file", m.Paths.logFile())
		user = serviceUser
	}
	return &kardianos.Config{
		Name:             name,
		DisplayName:      "tfd",
		Description:      "tfd: local language models over an OpenAI-compatible API",
		UserName:         user,
		Executable:       m.Paths.Executable,
		Arguments:        args,
		WorkingDirectory: m.Paths.WorkingDir,
		Dependencies:     []string{"After=network.target"},
		Option: kardianos.KeyValue{
			"KeepAlive":    true,
			"RunAtLoad":    true,
			"Restart":      "always",
			"LimitNOFILE":  65536,
			"LogDirectory": m.Paths.LogDir,
			tmplKey:        tmpl,
		},
	}
}

// render returns the plist or unit as Install writes it.
func (m *Manager) render() (string, error) {
	if m.Platform == Launchd {
		return renderLaunchd(m.kardianosConfig(), m.Paths.logFile())
	}
	return renderSystemd(m.kardianosConfig())
}

// Install copies the running binary to its fixed place; under launchd makes the _tfd user,
// the working and log folders it owns, and newsyslog's entry for the log; writes the default
// config where none exists and the service file; and has the service manager load and start
// the service. Installing over an earlier install replaces the binary and the service file and
// restarts the service; an existing config file is never touched. It refuses, before changing
// anything, a binary that go run built in a temporary folder.
func (m *Manager) Install(ctx context.Context) error {
	text, err := m.render()
	if err != nil {
		return fmt.Errorf("service: render the %s file: %w", m.Platform, err)
	}
	if err := m.checkSource(); err != nil {
		return err
	}
	for _, dir := range []string{m.Paths.ServiceDir, m.Paths.ConfigDir} {
		if err := mkdirMode(dir, 0o755, false); err != nil {
			return err
		}
	}
	var ids serviceIDs
	if m.Platform == Launchd {
		if ids, err = m.ensureUser(ctx); err != nil {
			return err
		}
	}
	if err := m.installBinary(ctx); err != nil {
		return err
	}
	if err := m.writeDefaultConfig(); err != nil {
		return err
	}
	m.checkConfig(ids)
	if m.Platform == Launchd {
		if err := m.prepareLaunchd(ctx, ids); err != nil {
			return err
		}
		if m.loaded(ctx) {
			// bootstrap refuses a loaded label: take the old definition out first.
			if _, err := m.Runner.Run(ctx, "launchctl", "bootout", m.launchdTarget()); err != nil {
				return fmt.Errorf("service: stop the installed tfd before replacing it: %w", err)
			}
		}
	}
	file := m.Paths.ServiceFile(m.Platform)
	if err := writeFileMode(file, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "installed %s\n", file)
	if m.Platform == Launchd {
		err = m.run(ctx, "launchctl", "bootstrap", "system", file)
	} else {
		err = m.runAll(ctx, []string{"daemon-reload"}, []string{"enable", systemdUnit}, []string{"restart", systemdUnit})
	}
	if err != nil {
		// Half an install helps nobody: take the service file out again (the config stays, as
		// an install that worked would have left it).
		if rmErr := os.Remove(file); rmErr == nil {
			err = fmt.Errorf("%w; removed %s again (the config %s stays)", err, file, m.Paths.ConfigFile())
		}
		return err
	}
	fmt.Fprintf(m.Out, "tfd is running; it reloads %s when you edit it\n", m.Paths.ConfigFile())
	if m.Platform == Launchd {
		fmt.Fprintf(m.Out, "log: %s (tfd logs follows it)\n", m.Paths.logFile())
	} else {
		fmt.Fprintf(m.Out, "log: journalctl -u %s (tfd logs follows it)\n", systemdUnit)
	}
	return nil
}

// mkdirMode makes dir with mode perm whatever the umask (a root shell with umask 077 would
// otherwise hide it from the service user), and its missing parents with 0755, so the service
// user can pass through them. A folder already there (a symlink to one counts) keeps its mode
// unless force.
func mkdirMode(dir string, perm fs.FileMode, force bool) error {
	_, statErr := os.Stat(dir)
	if statErr != nil {
		if parent := filepath.Dir(dir); parent != dir {
			if err := mkdirMode(parent, 0o755, false); err != nil {
				return err
			}
		}
		if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("service: %w", err)
		}
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("service: %s is not a folder: move it away and install again", dir)
	}
	if (statErr != nil || force) && info.Mode().Perm() != perm {
		if err := os.Chmod(dir, perm); err != nil {
			return fmt.Errorf("service: %w", err)
		}
	}
	return nil
}

// writeFileMode writes data to path with mode perm whatever the umask.
func writeFileMode(path string, data []byte, perm fs.FileMode) error {
	err := os.WriteFile(path, data, perm)
	if err == nil {
		err = os.Chmod(path, perm)
	}
	if err != nil {
		return fmt.Errorf("service: write %s: %w", path, err)
	}
	return nil
}

// writeDefaultConfig writes DefaultConfig to the config file unless a file (or a symlink to one)
// is already there.
func (m *Manager) writeDefaultConfig() error {
	path := m.Paths.ConfigFile()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(m.Out, "kept the config %s\n", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("service: create the config: %w", err)
	}
	_, err = f.Write(m.DefaultConfig)
	if err == nil {
		err = f.Chmod(0o644) // readable by the service user whatever root's umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("service: write the config %s: %w", path, err)
	}
	fmt.Fprintf(m.Out, "wrote the default config %s\n", path)
	return nil
}

// Uninstall stops the service and removes its file, under launchd also newsyslog's entry and
// the _tfd user and group. The binary, the config, the log, the working folder and any models
// stay, and it says so.
func (m *Manager) Uninstall(ctx context.Context) error {
	file := m.Paths.ServiceFile(m.Platform)
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("service: tfd is not installed (no %s)", file)
	}
	var err error
	if m.Platform == Launchd {
		if m.loaded(ctx) {
			err = m.run(ctx, "launchctl", "bootout", m.launchdTarget())
		}
	} else {
		err = m.run(ctx, "systemctl", "disable", "--now", systemdUnit)
	}
	if err != nil {
		return err
	}
	if err := os.Remove(file); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	if m.Platform == Systemd {
		if err := m.run(ctx, "systemctl", "daemon-reload"); err != nil {
			return err
		}
	} else {
		if err := os.Remove(m.Paths.newsyslogFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("service: %w", err)
		}
		if err := m.removeUser(ctx); err != nil {
			return err
		}
	}
	kept := fmt.Sprintf("the binary %s, the config %s, the working folder %s", m.Paths.Executable, m.Paths.ConfigFile(), m.Paths.WorkingDir)
	if m.Platform == Launchd {
		kept += ", the log folder " + m.Paths.LogDir
	}
	fmt.Fprintf(m.Out, "removed %s\nleft in place: %s and your models\n", file, kept)
	return nil
}

// Start starts the installed service.
func (m *Manager) Start(ctx context.Context) error { return m.start(ctx, "start", "kickstart") }

// start starts the installed service with systemctl's verb, or under launchd with launchctl's
// kickstart and its flags when the service is loaded, else by loading it.
func (m *Manager) start(ctx context.Context, verb string, kickstart ...string) error {
	if err := m.requireInstalled(); err != nil {
		return err
	}
	if m.Platform == Systemd {
		return m.run(ctx, "systemctl", verb, systemdUnit)
	}
	if m.loaded(ctx) {
		return m.run(ctx, "launchctl", append(kickstart, m.launchdTarget())...)
	}
	return m.run(ctx, "launchctl", "bootstrap", "system", m.Paths.ServiceFile(Launchd))
}

// Stop stops the service; it stays installed and starts again at boot. Under launchd that means
// bootout, since KeepAlive would restart a killed process.
func (m *Manager) Stop(ctx context.Context) error {
	if err := m.requireInstalled(); err != nil {
		return err
	}
	if m.Platform == Systemd {
		return m.run(ctx, "systemctl", "stop", systemdUnit)
	}
	if !m.loaded(ctx) {
		fmt.Fprintln(m.Out, "tfd is not running")
		return nil
	}
	return m.run(ctx, "launchctl", "bootout", m.launchdTarget())
}

// Restart stops and starts the service (a config edit needs no restart: tfd reloads it).
func (m *Manager) Restart(ctx context.Context) error {
	return m.start(ctx, "restart", "kickstart", "-k")
}

func (m *Manager) launchdTarget() string { return "system/" + launchdLabel }

// loaded reports whether launchd knows the label.
func (m *Manager) loaded(ctx context.Context) bool {
	_, err := m.Runner.Run(ctx, "launchctl", "print", m.launchdTarget())
	return err == nil
}

func (m *Manager) requireInstalled() error {
	file := m.Paths.ServiceFile(m.Platform)
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("service: tfd is not installed (no %s): run tfd install", file)
	}
	return nil
}

// run runs one command and wraps its error.
func (m *Manager) run(ctx context.Context, name string, args ...string) error {
	if _, err := m.Runner.Run(ctx, name, args...); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	return nil
}

// runAll runs systemctl with each argument list in turn, stopping at the first failure.
func (m *Manager) runAll(ctx context.Context, argLists ...[]string) error {
	for _, args := range argLists {
		if err := m.run(ctx, "systemctl", args...); err != nil {
			return err
		}
	}
	return nil
}

// statusAddr turns a listen address into one a client on this machine can dial.
func statusAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
