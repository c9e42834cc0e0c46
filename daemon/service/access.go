package service

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"tfd/daemon/config"
)

// The service reads files it does not own: the config, the model, the API keys. Install checks,
// from the files' modes, that the service user can reach them, and that the API keys are not
// open to everyone, and says how to fix what it finds. A warning, not a refusal: an ACL may
// grant what the mode bits do not show.

// checkConfig loads the installed config and warns about what would keep the service from
// working as it asks: a graceful stop longer than the service manager waits, and files out of
// the service user's reach.
func (m *Manager) checkConfig(ids serviceIDs) {
	eff, err := config.Load(config.Sources{File: m.Paths.ConfigFile()})
	if err != nil {
		fmt.Fprintf(m.Out, "warning: the config does not load, so tfd will not start until it is fixed:\n%v\n", err)
		return
	}
	cfg := eff.Config
	if grace := cfg.Server.ShutdownTimeout.Seconds(); grace > serviceStopSeconds-5 {
		fmt.Fprintf(m.Out, "warning: server.shutdown_timeout is %gs but %s kills tfd %d s after asking it to stop: lower it to %d s or less\n",
			grace, m.Platform, serviceStopSeconds, serviceStopSeconds-5)
	}
	m.warnUnreachable("the config", m.Paths.ConfigFile(), ids)
	if cfg.Model.Path != "" {
		m.warnUnreachable("model.path", cfg.Model.Path, ids)
	}
	if f := cfg.Server.APIKeysFile; f != "" && !strings.HasPrefix(f, "/run/credentials/") {
		m.checkKeysFile(f, ids)
	}
}

// serviceUserName names the service's user in messages.
func (m *Manager) serviceUserName() string {
	if m.Platform == Launchd {
		return serviceUser
	}
	return "tfd (systemd's DynamicUser)"
}

// warnUnreachable warns when the service user cannot read path (a folder: list and enter it).
func (m *Manager) warnUnreachable(what, path string, ids serviceIDs) {
	if why := m.unreachable(path, ids); why != "" {
		fmt.Fprintf(m.Out, "warning: the service runs as %s and cannot read %s %s: %s; let others read it (chmod o+rx on the folders, o+r on the files) or move it where they can\n",
			m.serviceUserName(), what, path, why)
	}
}

// checkKeysFile warns when the service user cannot read the API keys, or everyone can.
func (m *Manager) checkKeysFile(path string, ids serviceIDs) {
	fix := fmt.Sprintf("sudo chown root:%s %s && sudo chmod 640 %s", serviceUser, path, path)
	if m.Platform == Systemd {
		fix = fmt.Sprintf("sudo chmod 600 %s and hand it to the service with LoadCredential= (packaging/README.md says how)", path)
	}
	switch {
	case m.unreachable(path, serviceIDs{}) == "":
		fmt.Fprintf(m.Out, "warning: every user of this machine can read the API keys in %s: %s\n", path, fix)
	case m.unreachable(path, ids) != "":
		fmt.Fprintf(m.Out, "warning: the service runs as %s and cannot read the API keys in %s: %s\n", m.serviceUserName(), path, fix)
	}
}

// unreachable says why the service user (ids; zero: a user that owns nothing and is in no
// group of the files', as systemd's DynamicUser or any other user) cannot read path, or
// returns "" when it can or when path cannot be examined (the service will say what it meets).
func (m *Manager) unreachable(path string, ids serviceIDs) string {
	if m.Platform == Systemd {
		for _, hidden := range []string{"/home", "/root", "/run/user"} {
			if within(path, hidden) {
				return "the unit hides " + hidden + " from the service (ProtectHome=yes)"
			}
		}
		if within(path, m.Paths.WorkingDir) {
			// The unit's StateDirectory, where tfd pull puts models: with DynamicUser it is a
			// link into /var/lib/private, which only root may enter from outside, and which
			// systemd opens to the service.
			return ""
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || !filepath.IsAbs(real) {
		return ""
	}
	target, err := os.Stat(real)
	if err != nil {
		return ""
	}
	var dirs []string
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if info, err := os.Stat(dirs[i]); err == nil && !permits(info, ids, 1) {
			return fmt.Sprintf("it cannot enter %s (mode %04o)", dirs[i], info.Mode().Perm())
		}
	}
	need := fs.FileMode(4)
	if target.IsDir() {
		need = 5
	}
	if !permits(target, ids, need) {
		return fmt.Sprintf("%s has mode %04o", real, target.Mode().Perm())
	}
	return ""
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// permits reports whether the user ids gets the access bits (4 read, 1 enter) on info, taking
// the owner's, the group's or the others' bits as the kernel does: the first class that
// matches decides.
func permits(info fs.FileInfo, ids serviceIDs, bits fs.FileMode) bool {
	perm := info.Mode().Perm()
	if uid, gid, ok := fileOwner(info); ok && ids.uid != 0 {
		switch {
		case uid == ids.uid:
			return (perm>>6)&bits == bits
		case gid == ids.gid:
			return (perm>>3)&bits == bits
		}
	}
	return perm&bits == bits
}
