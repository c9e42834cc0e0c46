package daemon

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/kardianos/service"
)

// ServiceStatus is what `tfd status` reports.
type ServiceStatus struct {
	// File is the plist or unit; Installed reports whether it exists.
	File      string
	Installed bool
	// State is kardianos' view: running, stopped (installed, not running) or unknown.
	State service.Status
	// PID is the running process's id when the service manager tells it; 0 otherwise.
	PID int
	// Daemon is the running daemon's own report; nil when it did not answer (DaemonErr says why).
	Daemon    *StatusReport
	DaemonErr error
}

var launchdPID = regexp.MustCompile(`(?m)^\s*pid = (\d+)`)

// Status reports whether the service is installed and running and, when it runs, asks the
// daemon (at server.listen from the installed config) for its model, config generation and
// memory plan.
func (m *ServiceManager) Status(ctx context.Context) ServiceStatus {
	st := ServiceStatus{File: m.Paths.ServiceFile(m.Platform), State: service.StatusUnknown}
	if _, err := os.Stat(st.File); err == nil {
		st.Installed, st.State = true, service.StatusStopped
	}
	if m.Platform == Launchd {
		out, err := m.Runner.Run(ctx, "launchctl", "print", m.launchdTarget())
		if err == nil && strings.Contains(out, "state = running") {
			st.State = service.StatusRunning
			fmt.Sscan(firstMatch(launchdPID, out), &st.PID)
		}
	} else {
		out, err := m.Runner.Run(ctx, "systemctl", "is-active", ServiceUnit)
		if err == nil && strings.TrimSpace(out) == "active" {
			st.State = service.StatusRunning
			pid, _ := m.Runner.Run(ctx, "systemctl", "show", "--property=MainPID", "--value", ServiceUnit)
			fmt.Sscan(strings.TrimSpace(pid), &st.PID)
		}
	}
	if st.State == service.StatusRunning {
		st.Daemon, st.DaemonErr = m.askDaemon(ctx)
	}
	return st
}

// askDaemon reads the installed config for server.listen and fetches the status report there,
// with the first API key when the config has a keys file it can read (without one the daemon
// answers 401, and the error says so).
func (m *ServiceManager) askDaemon(ctx context.Context) (*StatusReport, error) {
	eff, err := LoadConfig(Sources{File: m.Paths.ConfigFile(), Environ: os.Environ()})
	if err != nil {
		return nil, err
	}
	var key string
	if file := eff.Config.Server.APIKeysFile; file != "" {
		if keys, err := ReadAPIKeys(file); err == nil {
			key = keys[0]
		}
	}
	client := cmp.Or(m.Client, &http.Client{Timeout: 3 * time.Second})
	rep, err := FetchStatus(ctx, client, eff.Config.Server.Listen, key)
	if err != nil {
		return nil, err
	}
	return &rep, nil
}

func firstMatch(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// Write prints the status for a person.
func (st ServiceStatus) Write(w io.Writer) {
	switch {
	case !st.Installed && st.State != service.StatusRunning:
		fmt.Fprintf(w, "tfd is not installed (no %s): run tfd install\n", st.File)
		return
	case st.State != service.StatusRunning:
		fmt.Fprintf(w, "tfd is installed (%s) and not running: tfd start\n", st.File)
		return
	}
	pid := ""
	if st.PID > 0 {
		pid = fmt.Sprintf(" (pid %d)", st.PID)
	}
	fmt.Fprintf(w, "tfd is installed (%s) and running%s\n", st.File, pid)
	if st.Daemon == nil {
		fmt.Fprintf(w, "the daemon did not answer: %v\n", st.DaemonErr)
		return
	}
	d := st.Daemon
	fmt.Fprintf(w, "model %s on %s, %s since %s\n", d.Model, d.Backend, d.Status, d.Started.Format(time.DateTime))
	fmt.Fprintf(w, "config %s, generation %d", cmp.Or(d.Config.File, "(none)"), d.Config.Generation)
	if r := d.Config.LastReload; r.Outcome != "" {
		fmt.Fprintf(w, ", last reload %s at %s %s", r.Outcome, r.At.Format(time.DateTime), r.Summary)
	}
	fmt.Fprintln(w)
	for _, p := range d.Config.Waiting {
		fmt.Fprintf(w, "waiting for a restart: %s\n", p)
	}
	fmt.Fprintf(w, "sessions %s: %d of %d in use, %d waiting\n", d.Host.Layout, d.Host.SessionsInUse, d.Host.Sessions, d.Host.Waiting)
	fmt.Fprint(w, d.Plan.Text)
}
