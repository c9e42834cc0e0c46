// Command tfd serves a local language model over an OpenAI-compatible HTTP API.
//
//	tfd serve [--config FILE] [--listen ADDR] [--model PATH] [--parallel N|auto]
//	tfd config [the same flags]   print the effective config and where each value came from
//	tfd version
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	_ "tfd/cpu" // registers the "cpu" backend
	"tfd/daemon"
)

// Exit codes: 0 success, 1 a failure while running, 2 a usage or configuration error.
const (
	exitFailure = 1
	exitUsage   = 2
)

const usage = `tfd serves a local language model over an OpenAI-compatible HTTP API.

Usage:
  tfd serve [flags]     serve the model until interrupted
  tfd config [flags]    print the effective config as TOML, with where each value came from
  tfd version           print the version

Flags of serve and config:
  --config FILE         the config file (default %s, if it exists)
  --listen ADDR         server.listen, e.g. 127.0.0.1:8417
  --model PATH          model.path, a Hugging Face model folder (default: the bundled model)
  --parallel N|auto     sessions.parallel

Settings come from the defaults, then the config file, then TFD_* environment variables
(TFD_SESSIONS_PARALLEL sets sessions.parallel), then flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, usage, daemon.DefaultConfigPath())
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "config":
		return printConfig(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version())
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprintf(stdout, usage, daemon.DefaultConfigPath())
		return 0
	}
	fmt.Fprintf(stderr, "tfd: unknown command %q\n\n"+usage, args[0], daemon.DefaultConfigPath())
	return exitUsage
}

func serve(args []string, stderr io.Writer) int {
	eff, code := loadConfig("serve", args, stderr)
	if eff == nil {
		return code
	}
	logger := daemon.NewLogger(stderr, eff.Config.Log.Level)
	logger.Info("starting", "version", version(), "config", cmp.Or(eff.File, "(none)"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := daemon.Run(ctx, eff.Config, logger); err != nil {
		report(stderr, err)
		return exitFailure
	}
	logger.Info("stopped")
	return 0
}

func printConfig(args []string, stdout, stderr io.Writer) int {
	eff, code := loadConfig("config", args, stderr)
	if eff == nil {
		return code
	}
	if err := daemon.WriteTOML(stdout, eff); err != nil {
		report(stderr, err)
		return exitFailure
	}
	return 0
}

// loadConfig parses the flags of serve and config and loads the configuration; on failure it
// reports the problem and returns nil with the exit code.
func loadConfig(cmd string, args []string, stderr io.Writer) (*daemon.Effective, int) {
	fs := flag.NewFlagSet("tfd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, usage, daemon.DefaultConfigPath()) }
	configFile := fs.String("config", "", "the config file")
	shortcuts := map[string]string{"listen": "server.listen", "model": "model.path", "parallel": "sessions.parallel"}
	for name, key := range shortcuts {
		fs.String(name, "", key)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tfd %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return nil, exitUsage
	}
	src := daemon.Sources{File: *configFile, FileRequired: *configFile != "", Environ: os.Environ()}
	if src.File == "" {
		src.File = daemon.DefaultConfigPath()
	}
	fs.Visit(func(f *flag.Flag) {
		if key, ok := shortcuts[f.Name]; ok {
			src.Flags = append(src.Flags, daemon.Flag{Name: "--" + f.Name, Key: key, Value: f.Value.String()})
		}
	})
	eff, err := daemon.LoadConfig(src)
	if err != nil {
		report(stderr, err)
		return nil, exitUsage
	}
	return eff, 0
}

// report prints err for a person, one "tfd: " line per problem (a config error lists them all).
func report(w io.Writer, err error) {
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintf(w, "tfd: %s\n", line)
	}
}

// version returns the module version this binary was built from, with the Go toolchain and
// target.
func version() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("tfd %s (%s, %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
