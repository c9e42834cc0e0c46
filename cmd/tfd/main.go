// Command tfd serves a local language model over an OpenAI-compatible HTTP API.
//
//	tfd serve [--config FILE] [--listen ADDR] [--model PATH] [--parallel N|auto]
//	tfd config [the same flags]   print the effective config and where each value came from
//	tfd plan [the same flags]     print the memory plan without loading the model
//	tfd pull [--dir DIR] [--revision REV] REPO[:FILE]   fetch a model from the Hugging Face hub
//	tfd install | uninstall | start | stop | restart | status   the system service
//	tfd logs [-n N] [--no-follow]   follow the service's log
//	tfd version
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	_ "tfd/cpu"  // registers the "cpu" backend
	_ "tfd/cuda" // registers the "cuda" backend (Linux with an NVIDIA driver)
	"tfd/daemon/config"
	"tfd/daemon/service"
	_ "tfd/metal" // registers the "metal" backend (macOS on Apple silicon)
)

// Exit codes: 0 success, 1 a failure while running, 2 a usage or configuration error.
const (
	exitFailure = 1
	exitUsage   = 2
)

const usage = `tfd serves a local language model over an OpenAI-compatible HTTP API.

Usage:
  tfd serve [flags]     serve the model until interrupted (SIGINT, SIGTERM)
  tfd config [flags]    print the effective config as TOML, with where each value came from
  tfd plan [flags]      print the memory plan for the config, without loading the model
  tfd bench [flags]     measure the model here: first token, tok/s at several concurrencies,
                        with and without drafts
  tfd pull [flags] REPO[:FILE]
                        fetch a model from the Hugging Face hub into the models folder
                        (model.dir) and print the model.path that serves it: REPO's config,
                        tokenizer, chat template and safetensors weights, or with :FILE that one
                        file (a GGUF, say); each file verified, an interrupted pull resumes
  tfd install           install and start the system service (launchd on macOS, systemd on Linux)
  tfd uninstall         stop and remove the service; the config and models stay
  tfd start | stop | restart
  tfd status            installed? running (or serving in the foreground)? the model, config
                        generation and memory plan
  tfd logs [flags]      print the service's last lines and follow its log (-n N lines first,
                        default 10; --no-follow to stop there)
  tfd version           print the version

Flags of serve, config, plan and bench:
  --config FILE         the config file (default %s, if it exists)
  --listen ADDR         server.listen, e.g. 127.0.0.1:8417
  --model PATH          model.path, a Hugging Face model folder (default: the bundled model)
  --parallel N|auto     sessions.parallel

Flags of serve (beside those above):
  --log-file FILE       log to FILE rather than standard error, following it when log rotation
                        moves it away (the LaunchDaemon runs tfd so)

Flags of bench (beside those above):
  --streams LIST        concurrent replies per run (default 1,4,16)
  --prompt N            prompt tokens per reply (default 256)
  --tokens N            tokens generated per reply (default 128)
  --temperature T       sample the replies at this temperature, reply i with seed i (default 0:
                        greedy); with it --top-p P and --top-k K (default: every token)
  --conversation N      instead: the first token of a conversation's fourth turn of N tokens,
                        with the prompt cache off, from its memory, and from its spill folder
                        after a restart

Flags of pull:
  --config FILE         the config file, for model.dir
  --dir DIR             model.dir, the models folder: REPO's files go to DIR/owner/name
                        (default: /var/lib/tfd/models, on macOS Homebrew's var/tfd/models, when
                        the service is installed or pull runs as root; else ~/.cache/tfd/models,
                        on macOS ~/Library/Caches/tfd/models)
  --revision REV        a branch, tag or commit of the repo (default main)
  HF_TOKEN in the environment is sent to the hub for gated and private repos; HF_ENDPOINT names
  another hub (default https://huggingface.co)

Settings come from the defaults, then the config file, then TFD_* environment variables
(TFD_SESSIONS_PARALLEL sets sessions.parallel), then flags. A running tfd applies edits of its
config file as they are saved.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, stdout, stderr, newServiceManager)
}

// runWith is run with the service manager the service commands use: tests give one that
// touches nothing of the system's.
func runWith(args []string, stdout, stderr io.Writer, newManager managerFunc) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, usage, service.DefaultConfigPath())
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "config":
		return printConfig(args[1:], stdout, stderr)
	case "plan":
		return printPlan(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "pull":
		return pull(args[1:], stdout, stderr)
	case "install", "uninstall", "start", "stop", "restart", "status":
		return serviceCommand(args[0], args[1:], stdout, stderr, newManager)
	case "logs":
		return logs(args[1:], stdout, stderr, newManager)
	case "version":
		fmt.Fprintln(stdout, version())
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprintf(stdout, usage, service.DefaultConfigPath())
		return 0
	}
	fmt.Fprintf(stderr, "tfd: unknown command %q\n\n"+usage, args[0], service.DefaultConfigPath())
	return exitUsage
}

func printConfig(args []string, stdout, stderr io.Writer) int {
	eff, _, code := loadConfig("config", args, stderr)
	if eff == nil {
		return code
	}
	if err := config.WriteTOML(stdout, eff); err != nil {
		report(stderr, err)
		return exitFailure
	}
	return 0
}

// loadConfig parses the flags of serve, config and plan and loads the configuration; it returns
// the sources too, so serve can read them again on reload. On failure it reports the problem and
// returns nil with the exit code.
func loadConfig(cmd string, args []string, stderr io.Writer) (*config.Effective, config.Sources, int) {
	return loadConfigWith(cmd, args, stderr, nil)
}

// loadConfigWith is loadConfig for a command with flags of its own, which extra defines.
func loadConfigWith(cmd string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*config.Effective, config.Sources, int) {
	return loadConfigArgs(cmd, args, stderr, extra, nil)
}

// loadConfigArgs is loadConfigWith for a command that takes arguments beside its flags, before
// or after them; it appends them to operands.
func loadConfigArgs(cmd string, args []string, stderr io.Writer, extra func(*flag.FlagSet), operands *[]string) (*config.Effective, config.Sources, int) {
	fs := flag.NewFlagSet("tfd "+cmd, flag.ContinueOnError)
	if extra != nil {
		extra(fs)
	}
	configFile := fs.String("config", "", "the config file")
	shortcuts := map[string]string{"listen": "server.listen", "model": "model.path", "parallel": "sessions.parallel"}
	for name, key := range shortcuts {
		fs.String(name, "", key)
	}
	if code, done := parseFlagsArgs(cmd, fs, args, stderr, operands); done {
		return nil, config.Sources{}, code
	}
	src := config.Sources{File: *configFile, FileRequired: *configFile != "", Environ: os.Environ()}
	if src.File == "" {
		src.File = service.DefaultConfigPath()
	}
	fs.Visit(func(f *flag.Flag) {
		if key, ok := shortcuts[f.Name]; ok {
			src.Flags = append(src.Flags, config.Flag{Name: "--" + f.Name, Key: key, Value: f.Value.String()})
		}
	})
	eff, err := config.Load(src)
	if err != nil {
		report(stderr, err)
		return nil, src, exitUsage
	}
	if cmd != "serve" { // serve logs them, in its log's format
		for _, w := range eff.Warnings {
			fmt.Fprintf(stderr, "tfd: warning: %s\n", w)
		}
	}
	return eff, src, 0
}

// report prints err for a person, one "tfd: " line per problem (a config error lists them all).
func report(w io.Writer, err error) {
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintf(w, "tfd: %s\n", line)
	}
}

// buildVersion is set by `make release` (-ldflags -X main.buildVersion=v1.2.3); empty otherwise.
var buildVersion string

// version returns the version this binary was built as (the release's, else the module's), with
// the Go toolchain and target.
func version() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if buildVersion != "" {
		v = buildVersion
	}
	return fmt.Sprintf("tfd %s (%s, %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
