package service

import (
	"os"
	"path/filepath"
	"runtime"
)

// Paths are the files and folders the service layer reads and writes.
type Paths struct {
	// ServiceDir holds the plist (/Library/LaunchDaemons) or the unit (/etc/systemd/system).
	ServiceDir string
	// ConfigDir holds tfd.toml; a folder of its own, since tfd watches it.
	ConfigDir string
	// LogDir holds tfd.log under launchd: a folder of its own that the service user owns, so
	// tfd can make the file again after newsyslog has rotated it. systemd logs to the journal
	// and ignores it.
	LogDir string
	// WorkingDir is the service's working directory (under systemd, its StateDirectory).
	WorkingDir string
	// NewsyslogDir holds newsyslog's entry for tfd.log (/etc/newsyslog.d); empty under systemd.
	NewsyslogDir string
	// Executable is the tfd binary the service runs: a fixed, root-owned place, never the
	// build that ran install.
	Executable string
	// Source is the binary Install copies to Executable: the running tfd. Empty when
	// Executable already is that binary (Homebrew's link into its Cellar, or an installed
	// /usr/local/bin/tfd running install again).
	Source string
}

// ServiceFile returns the path of the plist or unit.
func (p Paths) ServiceFile(platform Platform) string {
	if platform == Launchd {
		return filepath.Join(p.ServiceDir, launchdLabel+".plist")
	}
	return filepath.Join(p.ServiceDir, systemdUnit)
}

// ConfigFile returns the path of tfd.toml.
func (p Paths) ConfigFile() string { return filepath.Join(p.ConfigDir, "tfd.toml") }

// logFile returns the path of tfd.log.
func (p Paths) logFile() string { return filepath.Join(p.LogDir, "tfd.log") }

// ModelsDir returns the service's models folder, where tfd pull puts what it fetches for the
// service: "models" in its working folder (/var/lib/tfd/models on Linux, Homebrew's
// var/tfd/models on macOS). The service can read it wherever it runs: under systemd it is the
// unit's own StateDirectory, outside the home folders the unit hides (ProtectHome); under
// launchd it is inside _tfd's own folder. Uninstall leaves it, with the models in it.
func (p Paths) ModelsDir() string { return filepath.Join(p.WorkingDir, "models") }

// PullModelsDir returns the folder tfd pull puts models in when model.dir is empty: the service's
// ModelsDir when the service is installed on platform or tfd runs as root (asRoot), since
// only there can the service read what is pulled, and writing there takes root as install did;
// otherwise "tfd/models" in the user's cache folder userCache (os.UserCacheDir: ~/.cache on
// Linux, ~/Library/Caches on macOS), which needs no root, for a tfd serve run by that user. An
// empty userCache (no home folder) gives the service's folder too.
func (p Paths) PullModelsDir(platform Platform, asRoot bool, userCache string) string {
	if _, err := os.Stat(p.ServiceFile(platform)); err == nil || asRoot || userCache == "" {
		return p.ModelsDir()
	}
	return filepath.Join(userCache, "tfd", "models")
}

// newsyslogFile returns the path of newsyslog's entry for tfd.log.
func (p Paths) newsyslogFile() string { return filepath.Join(p.NewsyslogDir, "tfd.conf") }

// homebrewPrefix returns Homebrew's prefix on goarch: /opt/homebrew on Apple silicon, else
// /usr/local.
func homebrewPrefix(goarch string) string {
	if goarch == "arm64" {
		return "/opt/homebrew"
	}
	return "/usr/local"
}

// DefaultPaths returns the paths of a service install on goos/goarch for the running
// binary at running (symlinks resolved; empty when only the other paths matter): on macOS
// under Homebrew's prefix (etc/tfd, var/log/tfd, var/tfd), on Linux in /etc/tfd and
// /var/lib/tfd. The binary the service runs is fixed: see serviceBinary.
func DefaultPaths(goos, goarch, running string) Paths {
	exe, source := serviceBinary(goos, running)
	if goos == "darwin" {
		prefix := homebrewPrefix(goarch)
		return Paths{
			ServiceDir:   "/Library/LaunchDaemons",
			ConfigDir:    filepath.Join(prefix, "etc", "tfd"),
			LogDir:       filepath.Join(prefix, "var", "log", "tfd"),
			WorkingDir:   filepath.Join(prefix, "var", "tfd"),
			NewsyslogDir: "/etc/newsyslog.d",
			Executable:   exe,
			Source:       source,
		}
	}
	return Paths{
		ServiceDir: "/etc/systemd/system",
		ConfigDir:  "/etc/tfd",
		LogDir:     "/var/log",
		WorkingDir: "/var/lib/tfd",
		Executable: exe,
		Source:     source,
	}
}

// DefaultConfigPath returns where tfd looks for its config file when --config is not given:
// Homebrew's etc on macOS (/opt/homebrew/etc/tfd/tfd.toml on Apple silicon, else
// /usr/local/etc/tfd/tfd.toml), /etc/tfd/tfd.toml on Linux. The file lives in a folder of its
// own so that watching the folder stays cheap. `tfd install` writes the service to use it.
func DefaultConfigPath() string {
	return DefaultPaths(runtime.GOOS, runtime.GOARCH, "").ConfigFile()
}
