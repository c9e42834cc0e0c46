package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Under launchd tfd runs as _tfd, a hidden system user and group of its own that Install makes
// with dscl (as Apple's own daemons have _www, _mysql and the like) and Uninstall removes. The
// folders it writes belong to it, with modes no wider than 0750 and 0640. Under systemd the unit
// asks for a DynamicUser instead, and systemd makes the folders (StateDirectory, CacheDirectory).

// serviceIDs are the service user's and group's numeric ids under launchd; zero under systemd.
type serviceIDs struct{ uid, gid int }

// adminGID is macOS's admin group, 80 on every Mac. The log's group is admin, so that the people
// who administer the Mac read tfd's log without sudo, as they read /var/log/system.log
// (root:admin 0640).
const adminGID = 80

// The range the service user's id is taken from: macOS keeps ids below 500 for system accounts
// and hands out its own from the bottom, so tfd takes the highest id free both as a user's and
// as a group's, counting down from 499. The same machine gets the same id at each install.
const (
	serviceIDHigh = 499
	serviceIDLow  = 200
)

// ensureUser returns the ids of _tfd, making the user and its group where they are missing:
// hidden, no login shell, no home, no password.
func (m *Manager) ensureUser(ctx context.Context) (serviceIDs, error) {
	uid, uerr := m.dsclID(ctx, "/Users/"+serviceUser, "UniqueID")
	gid, gerr := m.dsclID(ctx, "/Groups/"+serviceUser, "PrimaryGroupID")
	if uerr == nil && gerr == nil {
		return serviceIDs{uid, gid}, nil
	}
	users, err := m.dsclIDs(ctx, "/Users", "UniqueID")
	if err != nil {
		return serviceIDs{}, err
	}
	groups, err := m.dsclIDs(ctx, "/Groups", "PrimaryGroupID")
	if err != nil {
		return serviceIDs{}, err
	}
	if gerr != nil {
		if gid, err = freeID(groups, users); err != nil {
			return serviceIDs{}, err
		}
		err = m.dsclCreate(ctx, "/Groups/"+serviceUser, [][2]string{
			{"PrimaryGroupID", strconv.Itoa(gid)}, {"RealName", "tfd service"}, {"Password", "*"},
		})
		if err != nil {
			return serviceIDs{}, err
		}
	}
	if uerr != nil {
		uid = gid
		if users[uid] {
			if uid, err = freeID(users, groups); err != nil {
				return serviceIDs{}, err
			}
		}
		err = m.dsclCreate(ctx, "/Users/"+serviceUser, [][2]string{
			{"UniqueID", strconv.Itoa(uid)}, {"PrimaryGroupID", strconv.Itoa(gid)},
			{"UserShell", "/usr/bin/false"}, {"NFSHomeDirectory", "/var/empty"},
			{"RealName", "tfd service"}, {"Password", "*"}, {"IsHidden", "1"},
		})
		if err != nil {
			return serviceIDs{}, err
		}
	}
	fmt.Fprintf(m.Out, "the service runs as %s (uid %d, gid %d)\n", serviceUser, uid, gid)
	return serviceIDs{uid, gid}, nil
}

// dsclCreate makes the record and sets its attributes; if a step fails it deletes the record
// again, so the next install starts clean.
func (m *Manager) dsclCreate(ctx context.Context, record string, attrs [][2]string) error {
	if _, err := m.Runner.Run(ctx, "dscl", ".", "-create", record); err != nil {
		return fmt.Errorf("service: make %s: %w", record, err)
	}
	for _, a := range attrs {
		if _, err := m.Runner.Run(ctx, "dscl", ".", "-create", record, a[0], a[1]); err != nil {
			m.Runner.Run(ctx, "dscl", ".", "-delete", record)
			return fmt.Errorf("service: set %s of %s (removed it again): %w", a[0], record, err)
		}
	}
	return nil
}

// dsclID reads one numeric attribute of a record ("UniqueID: 499"); an error means no record.
func (m *Manager) dsclID(ctx context.Context, record, attr string) (int, error) {
	out, err := m.Runner.Run(ctx, "dscl", ".", "-read", record, attr)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, fmt.Errorf("service: dscl gave no %s for %s", attr, record)
	}
	return strconv.Atoi(f[len(f)-1])
}

// dsclIDs returns the ids in use in a folder of records ("_www   70" a line).
func (m *Manager) dsclIDs(ctx context.Context, folder, attr string) (map[int]bool, error) {
	out, err := m.Runner.Run(ctx, "dscl", ".", "-list", folder, attr)
	if err != nil {
		return nil, fmt.Errorf("service: list the ids in use: %w", err)
	}
	used := map[int]bool{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) >= 2 {
			if id, err := strconv.Atoi(f[len(f)-1]); err == nil {
				used[id] = true
			}
		}
	}
	return used, nil
}

// freeID returns the highest id in the service range that neither map holds.
func freeID(a, b map[int]bool) (int, error) {
	for id := serviceIDHigh; id >= serviceIDLow; id-- {
		if !a[id] && !b[id] {
			return id, nil
		}
	}
	return 0, fmt.Errorf("service: no user and group id is free between %d and %d for %s: free one, or make %s yourself with dscl and install again",
		serviceIDLow, serviceIDHigh, serviceUser, serviceUser)
}

// removeUser deletes _tfd and its group, where they exist. Files they owned keep the numeric
// ids; the next install takes the same ids when they are still free.
func (m *Manager) removeUser(ctx context.Context) error {
	for _, record := range []string{"/Users/" + serviceUser, "/Groups/" + serviceUser} {
		if _, err := m.Runner.Run(ctx, "dscl", ".", "-read", record); err != nil {
			continue
		}
		if err := m.run(ctx, "dscl", ".", "-delete", record); err != nil {
			return err
		}
		fmt.Fprintf(m.Out, "removed %s\n", record)
	}
	return nil
}

// prepareLaunchd makes what the LaunchDaemon writes, owned by _tfd: the working folder
// (_tfd:_tfd 0750), the log folder and log (_tfd:admin, 0750 and 0640), and newsyslog's entry
// that rotates the log.
func (m *Manager) prepareLaunchd(ctx context.Context, ids serviceIDs) error {
	owner := fmt.Sprintf("%d:%d", ids.uid, ids.gid)
	logOwner := fmt.Sprintf("%d:%d", ids.uid, adminGID)
	if err := m.ownedDir(ctx, m.Paths.WorkingDir, owner); err != nil {
		return err
	}
	if err := m.ownedDir(ctx, m.Paths.LogDir, logOwner); err != nil {
		return err
	}
	if err := m.ownedLog(ctx, logOwner); err != nil {
		return err
	}
	return m.writeNewsyslog()
}

// ownedDir makes dir with mode 0750 and gives it to owner ("uid:gid").
func (m *Manager) ownedDir(ctx context.Context, dir, owner string) error {
	if err := mkdirMode(dir, 0o750, true); err != nil {
		return err
	}
	return m.run(ctx, "chown", owner, dir)
}

// ownedLog makes the log file if it is missing and gives it mode 0640 and to owner. The log
// folder belongs to _tfd, so whatever is at the log's path may have been put there by the
// service: a symlink there is refused, not followed, or root's chown would hand its target to
// _tfd.
func (m *Manager) ownedLog(ctx context.Context, owner string) error {
	path := m.Paths.logFile()
	before, err := os.Lstat(path)
	if err == nil && !before.Mode().IsRegular() {
		return fmt.Errorf("service: %s is a %s, not a file tfd wrote: remove it and install again", path, before.Mode().Type())
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("service: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("service: make the log: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || (before != nil && !os.SameFile(before, info)) {
		return fmt.Errorf("service: %s changed while install opened it: install again", path)
	}
	if err := f.Chmod(0o640); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	return m.run(ctx, "chown", "-h", owner, path)
}

// Log rotation under launchd: newsyslog (run by launchd every half hour) moves tfd.log aside
// past 10 MB, gzips it and keeps five; tfd notices the move at its next line and opens a new
// tfd.log (daemon.LogFile), so newsyslog needs to signal nothing (flag N).
const (
	logRotateKB   = 10 * 1024
	logRotateKeep = 5
)

// writeNewsyslog writes newsyslog's entry for tfd.log.
func (m *Manager) writeNewsyslog() error {
	log := m.Paths.logFile()
	if strings.ContainsAny(log, " \t#") {
		return fmt.Errorf("service: newsyslog cannot name the log %q (it has a space or #): install with a log folder without them", log)
	}
	text := fmt.Sprintf(`# tfd's log, written by tfd install and removed by tfd uninstall: rotate past %d MB, keep %d
# gzipped archives (Z). tfd opens tfd.log again by itself once it has been moved, so no signal (N).
# logfile	owner:group	mode	count	size(KB)	when	flags
%s	%s:admin	640	%d	%d	*	NZ
`, logRotateKB/1024, logRotateKeep, log, serviceUser, logRotateKeep, logRotateKB)
	if err := mkdirMode(m.Paths.NewsyslogDir, 0o755, false); err != nil {
		return err
	}
	return writeFileMode(m.Paths.newsyslogFile(), []byte(text), 0o644)
}
