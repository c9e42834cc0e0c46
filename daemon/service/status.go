package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"tfd/daemon/config"
	"tfd/daemon/status"
	"time"

	kardianos "github.com/kardianos/service"
)

// Status is what `tfd status` reports.
type Status struct {
	// File is the plist or unit; Installed reports whether it exists.
	File      string
	Installed bool
	// State is the service manager's view: running, stopped (installed, not running) or
	// unknown.
	State kardianos.Status
	// PID is the running service's process id when the service manager tells it; 0 otherwise.
	PID int
	// Listen is where tfd was asked: server.listen of the config the service uses.
	Listen string
	// Answered reports whether a tfd answered GET /health there, service or not; HealthModel
	// is the model it named.
	Answered    bool
	HealthModel string
	// Daemon is that tfd's full report; nil when none came (DaemonErr says why).
	Daemon    *status.Report
	DaemonErr error
}

var launchdPID = regexp.MustCompile(`(?m)^\s*pid = (\d+)`)

// Status reports whether the service is installed and running, and asks whatever tfd answers
// at server.listen from the service's config (the service, or a tfd serve in a terminal) for
// its model, config generation and memory plan.
func (m *Manager) Status(ctx context.Context) Status {
	st := Status{File: m.Paths.ServiceFile(m.Platform), State: kardianos.StatusUnknown}
	if _, err := os.Stat(st.File); err == nil {
		st.Installed, st.State = true, kardianos.StatusStopped
	}
	if m.Platform == Launchd {
		out, err := m.Runner.Run(ctx, "launchctl", "print", m.launchdTarget())
		if err == nil && strings.Contains(out, "state = running") {
			st.State = kardianos.StatusRunning
			fmt.Sscan(firstMatch(launchdPID, out), &st.PID)
		}
	} else {
		out, err := m.Runner.Run(ctx, "systemctl", "is-active", systemdUnit)
		if err == nil && strings.TrimSpace(out) == "active" {
			st.State = kardianos.StatusRunning
			pid, _ := m.Runner.Run(ctx, "systemctl", "show", "--property=MainPID", "--value", systemdUnit)
			fmt.Sscan(strings.TrimSpace(pid), &st.PID)
		}
	}
	m.askDaemon(ctx, &st)
	return st
}

// askDaemon reads the service's config for server.listen and asks there: GET /health, which
// needs no key, to learn whether a tfd answers at all; then GET /v1/tfd/status with the first
// key of server.api_keys_file when the file is readable, since the status may need a key.
func (m *Manager) askDaemon(ctx context.Context, st *Status) {
	eff, err := config.Load(config.Sources{File: m.Paths.ConfigFile(), Environ: os.Environ()})
	if err != nil {
		st.DaemonErr = err
		return
	}
	st.Listen = statusAddr(eff.Config.Server.Listen)
	client := cmp.Or(m.Client, &http.Client{Timeout: time.Second})
	var health struct{ Model string }
	if st.DaemonErr = getJSON(ctx, client, st.Listen, "/health", "", &health); st.DaemonErr != nil {
		return
	}
	st.Answered, st.HealthModel = true, health.Model
	key, keyErr := "", error(nil)
	if f := eff.Config.Server.APIKeysFile; f != "" {
		var keys []string
		if keys, keyErr = config.ReadAPIKeys(f); keyErr == nil {
			key = keys[0]
		}
	}
	var rep status.Report
	err = getJSON(ctx, client, st.Listen, status.Path, key, &rep)
	var refused *httpStatusError
	if errors.As(err, &refused) && refused.code == http.StatusUnauthorized {
		switch f := eff.Config.Server.APIKeysFile; {
		case keyErr != nil:
			err = fmt.Errorf("it needs an API key, and %w: run sudo tfd status, or tfd status as a user who can read it", keyErr)
		case key == "":
			err = fmt.Errorf("it needs an API key, and %s names no server.api_keys_file (that tfd runs with another config)", m.Paths.ConfigFile())
		default:
			err = fmt.Errorf("it refused the first key of %s (that tfd runs with other keys)", f)
		}
	}
	if err != nil {
		st.DaemonErr = err
		return
	}
	st.Daemon = &rep
}

// httpStatusError is an answer other than 200 OK.
type httpStatusError struct {
	url, status string
	code        int
}

func (e *httpStatusError) Error() string { return e.url + " answered " + e.status }

// getJSON fetches http://addr+path, with key as a bearer token when set, and decodes a 200
// answer into v.
func getJSON(ctx context.Context, client *http.Client, addr, path, key string, v any) error {
	url := "http://" + addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("nothing answers at %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &httpStatusError{url: url, status: resp.Status, code: resp.StatusCode}
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	return nil
}

func firstMatch(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// Write prints the status for a person.
func (st Status) Write(w io.Writer) {
	running := st.State == kardianos.StatusRunning
	switch {
	case running:
		pid := ""
		if st.PID > 0 {
			pid = fmt.Sprintf(" (pid %d)", st.PID)
		}
		fmt.Fprintf(w, "tfd is installed (%s) and running%s\n", st.File, pid)
		if st.Daemon == nil && !st.Answered {
			fmt.Fprintf(w, "the daemon did not answer: %v\n", st.DaemonErr)
			return
		}
	case st.Answered && st.Installed:
		fmt.Fprintf(w, "tfd is installed (%s) but the service manager does not report it running; a tfd answers on %s%s\n",
			st.File, st.Listen, st.pidText())
	case st.Answered:
		fmt.Fprintf(w, "tfd is running in the foreground (not installed as a service) on %s%s\n", st.Listen, st.pidText())
	case st.Installed:
		fmt.Fprintf(w, "tfd is installed (%s) and not running: tfd start\n", st.File)
		return
	default:
		fmt.Fprintf(w, "tfd is not installed (no %s): run tfd install\n", st.File)
		return
	}
	d := st.Daemon
	if d == nil {
		fmt.Fprintf(w, "model %s; no status report: %v\n", st.HealthModel, st.DaemonErr)
		return
	}
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
	if c := d.PromptCache; c.CapacityBlocks > 0 {
		fmt.Fprintf(w, "prompt cache: %d of %d blocks of %d tokens (%s of %s), %d hits in %d lookups, %d tokens reused",
			c.Blocks, c.CapacityBlocks, c.BlockTokens, mib(c.Bytes), mib(c.CapacityBytes), c.Hits, c.Lookups, c.TokensReused)
		if c.SpillDir != "" {
			fmt.Fprintf(w, "; spill folder %s: %d files, %s", c.SpillDir, c.SpillFiles, mib(c.SpillBytes))
			if c.SpillFull {
				fmt.Fprint(w, " (the disk is full: spilling stopped)")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, d.Plan.Text)
}

// mib writes n bytes in MiB, one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// pidText is " (pid N)" from the daemon's own report, or "" without one.
func (st Status) pidText() string {
	if st.Daemon == nil || st.Daemon.PID == 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", st.Daemon.PID)
}
