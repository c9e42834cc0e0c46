package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"tfd/configs"
	"tfd/daemon/service"
	"tfd/engine"
)

// managerFunc builds the service manager for a command; tests give one that works in a temporary
// folder with a recording command runner.
type managerFunc func(cmd string, stdout io.Writer) (*service.Manager, error)

// serviceCommand runs install, uninstall, start, stop, restart or status.
func serviceCommand(cmd string, args []string, stdout, stderr io.Writer, newManager managerFunc) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "tfd %s: unexpected argument %q (the service uses %s)\n", cmd, args[0], service.DefaultConfigPath())
		return exitUsage
	}
	m, err := newManager(cmd, stdout)
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	ctx := context.Background()
	switch cmd {
	case "install":
		err = m.Install(ctx)
	case "uninstall":
		err = m.Uninstall(ctx)
	case "start":
		err = m.Start(ctx)
	case "stop":
		err = m.Stop(ctx)
	case "restart":
		err = m.Restart(ctx)
	case "status":
		st := m.Status(ctx)
		st.Write(stdout)
		if !st.Installed && !st.Answered {
			return exitFailure
		}
		return 0
	}
	if err != nil {
		report(stderr, err)
		return exitFailure
	}
	if cmd != "install" && cmd != "uninstall" {
		fmt.Fprintf(stdout, "tfd: %s done\n", cmd)
	}
	return 0
}

// newServiceManager is the real service manager: this machine's service manager, the default
// paths, this binary (symlinks resolved, so that a Homebrew link is seen for its Cellar file).
// Every command but status and logs changes system state, so it needs root.
func newServiceManager(cmd string, stdout io.Writer) (*service.Manager, error) {
	platform, err := service.PlatformFor(runtime.GOOS)
	if err != nil {
		return nil, err
	}
	if cmd != "status" && cmd != "logs" && os.Geteuid() != 0 {
		return nil, fmt.Errorf("tfd %s changes the system's services and needs root: sudo tfd %s", cmd, cmd)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return nil, fmt.Errorf("find this program's path for the service: %w", err)
	}
	return &service.Manager{
		Platform:      platform,
		Paths:         service.DefaultPaths(runtime.GOOS, runtime.GOARCH, exe),
		Runner:        service.ExecRunner{},
		DefaultConfig: configs.Default,
		Out:           stdout,
	}, nil
}

func formatMemory(n uint64) string {
	if n == 0 {
		return "unknown"
	}
	return engine.FormatBytes(int64(n))
}
