package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"tfd/daemon/service/servicetest"

	kardianos "github.com/kardianos/service"
	"howett.net/plist"
)

var update = flag.Bool("update", false, "rewrite packaging/ from the templates")

// packagedManager is the manager whose files packaging/ holds: Homebrew on Apple silicon, and a
// release archive's /usr/local/bin on Linux.
func packagedManager(p Platform) *Manager {
	paths := DefaultPaths("darwin", "arm64", "/opt/homebrew/bin/tfd")
	if p == Systemd {
		paths = DefaultPaths("linux", "amd64", "/usr/local/bin/tfd")
	}
	return &Manager{Platform: p, Paths: paths}
}

// TestPackagingFiles renders the plist and the unit for the default paths and compares them with
// packaging/, so the shipped files stay what install writes (go test -run Packaging -update
// rewrites them).
func TestPackagingFiles(t *testing.T) {
	for p, file := range map[Platform]string{Launchd: "launchd/" + launchdLabel + ".plist", Systemd: "systemd/" + systemdUnit} {
		text, err := packagedManager(p).render()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "packaging", file)
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		shipped, err := os.ReadFile(path)
		if err != nil || string(shipped) != text {
			t.Errorf("%s differs from what install writes (%v); run go test ./daemon/service -run Packaging -update\n%s", path, err, text)
		}
	}
}

func TestPlist(t *testing.T) {
	m := packagedManager(Launchd)
	text, err := m.render()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if _, err := plist.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("the plist does not parse: %v\n%s", err, text)
	}
	want := map[string]any{
		"Label": launchdLabel,
		"ProgramArguments": []any{"/opt/homebrew/bin/tfd", "serve", "--config", "/opt/homebrew/etc/tfd/tfd.toml",
			"--log-file", "/opt/homebrew/var/log/tfd/tfd.log"},
		"RunAtLoad":          true,
		"KeepAlive":          true,
		"UserName":           "_tfd",
		"GroupName":          "_tfd",
		"Umask":              uint64(0o027),
		"ProcessType":        "Interactive",
		"ExitTimeOut":        uint64(serviceStopSeconds),
		"ThrottleInterval":   uint64(10),
		"SoftResourceLimits": map[string]any{"NumberOfFiles": uint64(65536)},
		"WorkingDirectory":   "/opt/homebrew/var/tfd",
		"StandardOutPath":    "/opt/homebrew/var/log/tfd/tfd.log",
		"StandardErrorPath":  "/opt/homebrew/var/log/tfd/tfd.log",
	}
	for key, w := range want {
		if !reflect.DeepEqual(got[key], w) {
			t.Errorf("%s = %#v, want %#v", key, got[key], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the plist has %d keys, want %d: %v", len(got), len(want), got)
	}
	if stopSecondsText != "30" || serviceStopSeconds != 30 {
		t.Errorf("the templates' stop timeout %s differs from serviceStopSeconds %d", stopSecondsText, serviceStopSeconds)
	}
}

// TestPlistEscapes checks that paths with XML's special characters survive.
func TestPlistEscapes(t *testing.T) {
	m := packagedManager(Launchd)
	m.Paths = under(DefaultPaths("darwin", "arm64", "/Users/a&b/<tfd>"), "/tmp/it's")
	text, err := m.render()
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ ProgramArguments []string }
	if _, err := plist.Unmarshal([]byte(text), &got); err != nil || got.ProgramArguments[0] != "/tmp/it's/usr/local/bin/tfd" ||
		got.ProgramArguments[3] != "/tmp/it's/opt/homebrew/etc/tfd/tfd.toml" {
		t.Errorf("arguments %q (%v)", got.ProgramArguments, err)
	}
}

func TestUnit(t *testing.T) {
	text, err := packagedManager(Systemd).render()
	if err != nil {
		t.Fatal(err)
	}
	got := parseUnit(t, text)
	want := map[string]string{
		"Unit.Description":               "tfd: local language models over an OpenAI-compatible API",
		"Unit.ConditionFileIsExecutable": "/usr/local/bin/tfd",
		"Unit.After":                     "network.target",
		"Service.ExecStart":              `/usr/local/bin/tfd "serve" "--config" "/etc/tfd/tfd.toml"`,
		"Service.WorkingDirectory":       "/var/lib/tfd",
		"Service.Restart":                "always",
		"Service.RestartSec":             "5",
		"Service.TimeoutStopSec":         "30",
		"Service.KillSignal":             "SIGTERM",
		"Service.LimitNOFILE":            "65536",
		// Unprivileged, in a read-only view of the system; the GPU's devices stay reachable.
		"Service.DynamicUser":             "yes",
		"Service.StateDirectory":          "tfd",
		"Service.CacheDirectory":          "tfd",
		"Service.UMask":                   "0027",
		"Service.NoNewPrivileges":         "yes",
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "yes",
		"Service.PrivateTmp":              "yes",
		"Service.ProtectKernelTunables":   "yes",
		"Service.ProtectKernelModules":    "yes",
		"Service.ProtectControlGroups":    "yes",
		"Service.ProtectKernelLogs":       "yes",
		"Service.ProtectHostname":         "yes",
		"Service.ProtectProc":             "invisible",
		"Service.RestrictSUIDSGID":        "yes",
		"Service.RestrictRealtime":        "yes",
		"Service.RestrictNamespaces":      "yes",
		"Service.LockPersonality":         "yes",
		"Service.SystemCallArchitectures": "native",
		"Service.CapabilityBoundingSet":   "",
		"Install.WantedBy":                "multi-user.target",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unit:\n%v\nwant\n%v", got, want)
	}
}

// parseUnit reads a systemd unit into "Section.Key" → value, failing on a repeated key.
func parseUnit(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("bad unit line %q", line)
			}
			if _, dup := out[section+"."+k]; dup {
				t.Fatalf("repeated key %s.%s", section, k)
			}
			out[section+"."+k] = v
		}
	}
	return out
}

// newTestManager installs into a temporary root with a recording runner. The binary it
// installs is a small file outside the root; the temporary folder whose builds it refuses is
// one of the root's, since every test file lies under os.TempDir(). Its client reaches no
// daemon, so a tfd serving on this machine does not change what status says.
func newTestManager(t *testing.T, p Platform, r *servicetest.Runner) (*Manager, *bytes.Buffer) {
	t.Helper()
	goos := map[Platform]string{Launchd: "darwin", Systemd: "linux"}[p]
	root := t.TempDir()
	// The service user passes through the folders above the test's files, as through / and
	// /opt on a real machine (t.TempDir makes them 0700).
	os.Chmod(filepath.Dir(root), 0o755)
	os.Chmod(root, 0o755)
	src := filepath.Join(t.TempDir(), "tfd")
	os.WriteFile(src, []byte("#!tfd, built\n"), 0o700)
	out := &bytes.Buffer{}
	return &Manager{Platform: p, Paths: under(DefaultPaths(goos, "arm64", src), root),
		Runner: r, DefaultConfig: []byte("# the default\n"), Out: out, TempDir: filepath.Join(root, "tmp"),
		Client: servicetest.NoDaemon()}, out
}

// macUsers is what dscl lists on a test Mac: uid 499 and gid 498 are taken, so _tfd gets 497.
func macUsers() map[string]string {
	return map[string]string{
		"dscl . -list /Users UniqueID":        "_www  70\nroot 0\n_taken 499\nalice 501\n",
		"dscl . -list /Groups PrimaryGroupID": "admin 80\n_taken 498\nwheel 0\n",
	}
}

// makeUserCmds are the commands that make _tfd with ids 497.
var makeUserCmds = []string{
	"dscl . -read /Users/_tfd UniqueID",
	"dscl . -read /Groups/_tfd PrimaryGroupID",
	"dscl . -list /Users UniqueID",
	"dscl . -list /Groups PrimaryGroupID",
	"dscl . -create /Groups/_tfd",
	"dscl . -create /Groups/_tfd PrimaryGroupID 497",
	"dscl . -create /Groups/_tfd RealName tfd service",
	"dscl . -create /Groups/_tfd Password *",
	"dscl . -create /Users/_tfd",
	"dscl . -create /Users/_tfd UniqueID 497",
	"dscl . -create /Users/_tfd PrimaryGroupID 497",
	"dscl . -create /Users/_tfd UserShell /usr/bin/false",
	"dscl . -create /Users/_tfd NFSHomeDirectory /var/empty",
	"dscl . -create /Users/_tfd RealName tfd service",
	"dscl . -create /Users/_tfd Password *",
	"dscl . -create /Users/_tfd IsHidden 1",
}

func TestInstallLaunchd(t *testing.T) {
	r := &servicetest.Runner{Fail: map[string]bool{"launchctl print": true, "dscl . -read": true}, Out: macUsers()}
	m, out := newTestManager(t, Launchd, r)
	ctx := context.Background()
	if err := m.Install(ctx); err != nil {
		t.Fatal(err)
	}
	plistFile := m.Paths.ServiceFile(Launchd)
	want := append(slices.Clone(makeUserCmds),
		"chown 0:0 "+filepath.Join(filepath.Dir(m.Paths.Executable), ".tfd.install"),
		"chown 497:497 "+m.Paths.WorkingDir,
		"chown 497:80 "+m.Paths.LogDir,
		"chown -h 497:80 "+m.Paths.logFile(),
		"launchctl print system/dev.tfd.tfd", "launchctl bootstrap system "+plistFile)
	if got := r.Take(); !reflect.DeepEqual(got, want) {
		t.Errorf("install ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkFile(t, m.Paths.ConfigFile(), "# the default\n")
	written, _ := os.ReadFile(plistFile)
	if rendered, _ := m.render(); string(written) != rendered {
		t.Error("the installed plist differs from Render")
	}
	if !strings.Contains(string(written), "<string>"+m.Paths.Executable+"</string>") {
		t.Errorf("the plist does not run the installed binary %s", m.Paths.Executable)
	}
	checkFile(t, m.Paths.newsyslogFile(), `# tfd's log, written by tfd install and removed by tfd uninstall: rotate past 10 MB, keep 5
# gzipped archives (Z). tfd opens tfd.log again by itself once it has been moved, so no signal (N).
# logfile	owner:group	mode	count	size(KB)	when	flags
`+m.Paths.logFile()+"\t_tfd:admin\t640\t5\t10240\t*\tNZ\n")
	for _, want := range []string{m.Paths.logFile(), "the service runs as _tfd (uid 497, gid 497)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("install did not say %q:\n%s", want, out)
		}
	}

	// Installed and loaded: a second install keeps the user and the edited config, and
	// replaces the plist.
	r.Fail = nil
	r.Out = map[string]string{"dscl . -read /Users/_tfd": "UniqueID: 497\n", "dscl . -read /Groups/_tfd": "PrimaryGroupID: 497\n"}
	os.WriteFile(m.Paths.ConfigFile(), []byte("# edited\n"), 0o644)
	if err := m.Install(ctx); err != nil {
		t.Fatal(err)
	}
	checkFile(t, m.Paths.ConfigFile(), "# edited\n")
	want = []string{"dscl . -read /Users/_tfd UniqueID", "dscl . -read /Groups/_tfd PrimaryGroupID",
		"chown 0:0 " + filepath.Join(filepath.Dir(m.Paths.Executable), ".tfd.install"),
		"chown 497:497 " + m.Paths.WorkingDir, "chown 497:80 " + m.Paths.LogDir, "chown -h 497:80 " + m.Paths.logFile(),
		"launchctl print system/dev.tfd.tfd", "launchctl bootout system/dev.tfd.tfd", "launchctl bootstrap system " + plistFile}
	if got := r.Take(); !reflect.DeepEqual(got, want) {
		t.Errorf("reinstall ran\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	verbs := []struct {
		run  func(context.Context) error
		want []string
	}{
		{m.Restart, []string{"launchctl print system/dev.tfd.tfd", "launchctl kickstart -k system/dev.tfd.tfd"}},
		{m.Start, []string{"launchctl print system/dev.tfd.tfd", "launchctl kickstart system/dev.tfd.tfd"}},
		{m.Stop, []string{"launchctl print system/dev.tfd.tfd", "launchctl bootout system/dev.tfd.tfd"}},
		{m.Uninstall, []string{"launchctl print system/dev.tfd.tfd", "launchctl bootout system/dev.tfd.tfd",
			"dscl . -read /Users/_tfd", "dscl . -delete /Users/_tfd", "dscl . -read /Groups/_tfd", "dscl . -delete /Groups/_tfd"}},
	}
	for i, v := range verbs {
		if err := v.run(ctx); err != nil {
			t.Fatalf("verb %d: %v", i, err)
		}
		if got := r.Take(); !reflect.DeepEqual(got, v.want) {
			t.Errorf("verb %d ran %q, want %q", i, got, v.want)
		}
	}
	for _, gone := range []string{plistFile, m.Paths.newsyslogFile()} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("uninstall left %s: %v", gone, err)
		}
	}
	checkFile(t, m.Paths.ConfigFile(), "# edited\n")
	if !strings.Contains(out.String(), "left in place: the binary") {
		t.Errorf("uninstall did not say what it left:\n%s", out)
	}
	if err := m.Start(ctx); err == nil || !strings.Contains(err.Error(), "run tfd install") {
		t.Errorf("start after uninstall: %v", err)
	}
}

// TestServiceUserKept: an install finds _tfd made before and makes nothing; without a free id
// it says what to do.
func TestServiceUserIDs(t *testing.T) {
	used := map[int]bool{}
	for id := serviceIDLow; id <= serviceIDHigh; id++ {
		used[id] = true
	}
	if _, err := freeID(used, nil); err == nil || !strings.Contains(err.Error(), "make _tfd yourself with dscl") {
		t.Errorf("no free id: %v", err)
	}
	delete(used, 350)
	if id, err := freeID(used, map[int]bool{}); id != 350 || err != nil {
		t.Errorf("freeID = %d, %v; want 350", id, err)
	}
	// A group made before and no user: the user takes the group's id when it is free.
	r := &servicetest.Runner{Fail: map[string]bool{"dscl . -read /Users": true},
		Out: map[string]string{"dscl . -read /Groups/_tfd PrimaryGroupID": "PrimaryGroupID: 420\n",
			"dscl . -list": "root 0\n"}}
	m, _ := newTestManager(t, Launchd, r)
	ids, err := m.ensureUser(context.Background())
	if err != nil || ids != (serviceIDs{420, 420}) {
		t.Errorf("ensureUser = %v, %v; want 420/420", ids, err)
	}
	if got := r.Take(); slices.Contains(got, "dscl . -create /Groups/_tfd") || !slices.Contains(got, "dscl . -create /Users/_tfd UniqueID 420") {
		t.Errorf("ran %q", got)
	}
	// A step that fails takes the half-made record out again.
	r = &servicetest.Runner{Fail: map[string]bool{"dscl . -read": true, "dscl . -create /Users/_tfd UserShell": true}, Out: macUsers()}
	m.Runner = r
	if _, err := m.ensureUser(context.Background()); err == nil || !strings.Contains(err.Error(), "removed it again") {
		t.Errorf("ensureUser with dscl failing: %v", err)
	}
	if got := r.Take(); got[len(got)-1] != "dscl . -delete /Users/_tfd" {
		t.Errorf("the failed user was not removed: %q", got)
	}
}

func TestInstallSystemd(t *testing.T) {
	r := &servicetest.Runner{}
	m, _ := newTestManager(t, Systemd, r)
	ctx := context.Background()
	if err := m.Install(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"chown 0:0 " + filepath.Join(filepath.Dir(m.Paths.Executable), ".tfd.install"),
		"systemctl daemon-reload", "systemctl enable tfd.service", "systemctl restart tfd.service"}
	if got := r.Take(); !reflect.DeepEqual(got, want) {
		t.Errorf("install ran %q, want %q", got, want)
	}
	// systemd makes the working folder itself (StateDirectory), owned by the DynamicUser.
	if _, err := os.Stat(m.Paths.WorkingDir); !os.IsNotExist(err) {
		t.Errorf("install made %s (%v), which is systemd's to make", m.Paths.WorkingDir, err)
	}
	for _, v := range []struct {
		run  func(context.Context) error
		want []string
	}{
		{m.Stop, []string{"systemctl stop tfd.service"}},
		{m.Start, []string{"systemctl start tfd.service"}},
		{m.Restart, []string{"systemctl restart tfd.service"}},
		{m.Uninstall, []string{"systemctl disable --now tfd.service", "systemctl daemon-reload"}},
	} {
		if err := v.run(ctx); err != nil {
			t.Fatal(err)
		}
		if got := r.Take(); !reflect.DeepEqual(got, v.want) {
			t.Errorf("ran %q, want %q", got, v.want)
		}
	}
	checkFile(t, m.Paths.ConfigFile(), "# the default\n")
}

// TestInstallKeepsSymlinkedConfig checks that a config that is a symlink (a dotfiles repo) is
// not replaced.
func TestInstallKeepsSymlinkedConfig(t *testing.T) {
	m, _ := newTestManager(t, Systemd, &servicetest.Runner{})
	os.MkdirAll(m.Paths.ConfigDir, 0o755)
	target := filepath.Join(t.TempDir(), "mine.toml")
	os.WriteFile(target, []byte("# mine\n"), 0o644)
	os.Symlink(target, m.Paths.ConfigFile())
	if err := m.Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkFile(t, target, "# mine\n")
}

func TestServiceStatus(t *testing.T) {
	daemon := fakeDaemon(t, "sk-status")
	r := &servicetest.Runner{Out: map[string]string{"launchctl print": "system/dev.tfd.tfd = {\n\tstate = running\n\tpid = 4242\n}"}}
	m, _ := newTestManager(t, Launchd, r)
	m.Client = nil
	os.MkdirAll(m.Paths.ConfigDir, 0o755)
	keys := filepath.Join(m.Paths.ConfigDir, "keys")
	os.WriteFile(keys, []byte("# tfd status uses the first\nsk-status\nsk-other\n"), 0o600)
	os.WriteFile(m.Paths.ConfigFile(), []byte("[server]\nlisten = \""+daemon.Listener.Addr().String()+"\"\napi_keys_file = \""+keys+"\"\n"), 0o644)
	st := m.Status(context.Background())
	if st.Installed || st.State != kardianos.StatusRunning || st.PID != 4242 || st.Daemon == nil || st.Daemon.Config.Generation != 3 {
		t.Errorf("status %+v", st)
	}
	var text bytes.Buffer
	st.Write(&text)
	for _, want := range []string{"running (pid 4242)", "model gopher", "generation 3", "memory plan"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, &text)
		}
	}
	r.Out = nil
	r.Fail = map[string]bool{"launchctl print": true}
	daemon.Close()
	var b bytes.Buffer
	if st := m.Status(context.Background()); st.Answered {
		t.Errorf("a closed daemon answered: %+v", st)
	} else {
		st.Write(&b)
	}
	if !strings.Contains(b.String(), "not installed") {
		t.Errorf("status says %q", &b)
	}
}

func checkFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("%s holds %q (%v), want %q", path, got, err, want)
	}
}

func TestPlatformFor(t *testing.T) {
	if p, err := PlatformFor("darwin"); p != Launchd || err != nil {
		t.Error(p, err)
	}
	if _, err := PlatformFor("windows"); err == nil {
		t.Error("windows has no service here")
	}
	if got := DefaultPaths("darwin", "amd64", "").ConfigFile(); got != "/usr/local/etc/tfd/tfd.toml" {
		t.Errorf("Intel Mac config %s", got)
	}
	if got := DefaultPaths("darwin", "arm64", "").ConfigFile(); got != "/opt/homebrew/etc/tfd/tfd.toml" {
		t.Errorf("Apple silicon config %s", got)
	}
}

// TestFailedInstallLeavesNoServiceFile: when the service manager refuses (a Linux without
// systemd, say), install takes its unit out again and says so; the config it wrote stays.
func TestFailedInstallLeavesNoServiceFile(t *testing.T) {
	r := &servicetest.Runner{Fail: map[string]bool{"systemctl daemon-reload": true}}
	m, _ := newTestManager(t, Systemd, r)
	err := m.Install(context.Background())
	if err == nil || !strings.Contains(err.Error(), "removed "+m.Paths.ServiceFile(Systemd)+" again") {
		t.Fatalf("Install with systemctl failing: %v", err)
	}
	if _, err := os.Stat(m.Paths.ServiceFile(Systemd)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unit is still there: %v", err)
	}
	if _, err := os.Stat(m.Paths.ConfigFile()); err != nil {
		t.Errorf("the config is gone: %v", err)
	}
}

// under returns p with every path it writes moved below root; Source, which it only reads,
// stays.
func under(p Paths, root string) Paths {
	join := func(s string) string {
		if s == "" {
			return ""
		}
		return filepath.Join(root, s)
	}
	return Paths{
		ServiceDir:   join(p.ServiceDir),
		ConfigDir:    join(p.ConfigDir),
		LogDir:       join(p.LogDir),
		WorkingDir:   join(p.WorkingDir),
		NewsyslogDir: join(p.NewsyslogDir),
		Executable:   join(p.Executable),
		Source:       p.Source,
	}
}
