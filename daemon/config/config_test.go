package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tfd.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigDefaults(t *testing.T) {
	eff, err := Load(Sources{File: filepath.Join(t.TempDir(), "absent.toml")})
	if err != nil {
		t.Fatal(err)
	}
	if eff.Config != Default() || eff.File != "" {
		t.Errorf("config %+v from %q, want the defaults", eff.Config, eff.File)
	}
	for key, o := range eff.Origins {
		if o.Layer != LayerDefault {
			t.Errorf("%s from %s, want default", key, o)
		}
	}
	if ps := Default().problems(); len(ps) > 0 {
		t.Errorf("the defaults are invalid: %v", ps)
	}
}

func TestConfigPrecedence(t *testing.T) {
	path := writeFile(t, `
[server]
listen = "127.0.0.1:9000"
[sessions]
parallel = 4
grow = 100
layout = "4096x2"
[residency]
keep_warm = 60
`)
	eff, err := Load(Sources{
		File:    path,
		Environ: []string{"TFD_SESSIONS_PARALLEL=2", "TFD_SESSIONS_GROW=200", "TFD_PROMPT_CACHE_GIB=1.5", "HOME=/root"},
		Flags:   []Flag{{Name: "--parallel", Key: "sessions.parallel", Value: "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := eff.Config
	if c.Server.Listen != "127.0.0.1:9000" || c.Sessions.Parallel != "1" || c.Sessions.Grow != 200 ||
		c.Sessions.Layout != "4096x2" || c.PromptCache.GiB != 1.5 || c.Residency.KeepWarm != time.Minute || c.Sampling.MaxTokens != 4096 {
		t.Errorf("config %+v", c)
	}
	for key, want := range map[string]string{
		"server.listen":       "file " + path,
		"sessions.parallel":   "flag --parallel",
		"sessions.grow":       "env TFD_SESSIONS_GROW",
		"prompt_cache.gib":    "env TFD_PROMPT_CACHE_GIB",
		"sampling.max_tokens": "default",
	} {
		if got := eff.Origins[key].String(); got != want {
			t.Errorf("%s from %q, want %q", key, got, want)
		}
	}
}

func TestEnvKey(t *testing.T) {
	for name, want := range map[string]string{
		"TFD_SESSIONS_PARALLEL":      "sessions.parallel",
		"TFD_SERVER_API_KEYS_FILE":   "server.api_keys_file",
		"TFD_PROMPT_CACHE_SPILL_DIR": "prompt_cache.spill_dir",
		"TFD_LOG_LEVEL":              "log.level",
		"TFD_NOSECTION":              "nosection",
		"TFD_FOO_BAR_BAZ":            "foo.bar_baz",
	} {
		if got := envKey(name); got != want {
			t.Errorf("envKey(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     []string
		flags   []Flag
		missing bool     // name a file that does not exist, as --config does
		want    []string // substrings of the error
	}{
		{name: "missing explicit file", missing: true, want: []string{"absent.toml does not exist"}},
		{name: "TOML syntax", file: "[server\nlisten=", want: []string{"tfd.toml:1:8: toml: ", "fix the TOML there"}},
		{name: "TOML syntax further down", file: "[server]\nlisten = \"127.0.0.1:1\"\n\n[sessions]\nparallel = 2 3\n", want: []string{"tfd.toml:5:14: toml: "}},
		{name: "unknown key in file", file: "[server]\nlisten_addr = \"x\"", want: []string{"unknown key server.listen_addr (file", "server.listen, server.api_keys_file"}},
		{name: "unknown section", file: "[sever]\nlisten = \"x\"", want: []string{"unknown key sever.listen", "[server]"}},
		{name: "wrong type", env: []string{"TFD_SESSIONS_GROW=lots"}, want: []string{`sessions.grow = "lots" (env TFD_SESSIONS_GROW): want a whole number`}},
		{name: "wrong bool", file: "[drafts]\nenabled = \"maybe\"", want: []string{`drafts.enabled = "maybe"`, "want true or false"}},
		{name: "bad duration", file: "[residency]\nkeep_warm = \"soon\"", want: []string{"residency.keep_warm", "duration"}},
		{name: "parallel zero", flags: []Flag{{"--parallel", "sessions.parallel", "0"}}, want: []string{`sessions.parallel = "0" (flag --parallel): want "auto" or a whole number ≥ 1`}},
		{name: "listen without port", flags: []Flag{{"--listen", "server.listen", "localhost"}}, want: []string{`server.listen = "localhost" (flag --listen): want host:port`}},
		{name: "open listen without keys", flags: []Flag{{"--listen", "server.listen", "0.0.0.0:8417"}},
			want: []string{`server.listen = "0.0.0.0:8417" (flag --listen): not a loopback address`, "server.api_keys_file", "server.allow_open = true"}},
		{name: "all interfaces without keys", file: "[server]\nlisten = \":8417\"", want: []string{`server.listen = ":8417"`, "not a loopback address"}},
		{name: "negative stall timeout", file: "[server]\nstall_timeout = \"-1s\"", want: []string{`server.stall_timeout = "-1s"`, "≥ 0"}},
		{name: "backend", env: []string{"TFD_MODEL_BACKEND=tpu"}, want: []string{`model.backend = "tpu"`, "auto, metal, cuda, cpu"}},
		{name: "several at once", file: "[sampling]\ntemperature = 3\ntop_p = 0\n[log]\nlevel = \"loud\"\n[sessions]\nlayout = \"100x0\"",
			want: []string{"sampling.temperature = 3", "sampling.top_p = 0", `log.level = "loud"`, "sessions.layout", "NxCOUNT"}},
		{name: "negative context", file: "[model]\ncontext = -5", want: []string{"model.context = -5", "positive number of tokens"}},
		{name: "quantize", file: "[model]\nquantize = \"q5\"", want: []string{`model.quantize = "q5"`, `"q8" or "q4"`}},
		{name: "prompt cache", file: "[prompt_cache]\ngib = -2", want: []string{"prompt_cache.gib = -2", "-1 (a default share)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{Environ: tc.env, Flags: tc.flags, FileRequired: true}
			switch {
			case tc.missing:
				src.File = filepath.Join(t.TempDir(), "absent.toml")
			case tc.file != "":
				src.File = writeFile(t, tc.file)
			}
			_, err := Load(src)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOpenListen: a listen address that is not loopback needs API keys or server.allow_open.
func TestOpenListen(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	for _, tc := range []struct {
		listen, extra string
		ok            bool
	}{
		{"127.0.0.1:8417", "", true},
		{"127.3.4.5:8417", "", true},
		{"localhost:8417", "", true},
		{"[::1]:8417", "", true},
		{"0.0.0.0:8417", "", false},
		{"[::]:8417", "", false},
		{":8417", "", false},
		{"192.168.1.20:8417", "", false},
		{"myhost.local:8417", "", false}, // not resolved: it may well be reachable
		{"0.0.0.0:8417", "allow_open = true\n", true},
		{"0.0.0.0:8417", "api_keys_file = \"" + keys + "\"\n", true},
	} {
		_, err := Load(Sources{File: writeFile(t, "[server]\nlisten = \""+tc.listen+"\"\n"+tc.extra), FileRequired: true})
		if (err == nil) != tc.ok {
			t.Errorf("listen %s with %q: err %v, want ok %v", tc.listen, tc.extra, err, tc.ok)
		}
	}
}

// TestStrayEnvironment: a TFD_* variable that names no key is a one-line warning naming it, not
// an error; a real key with a bad value still is one.
func TestStrayEnvironment(t *testing.T) {
	eff, err := Load(Sources{Environ: []string{"TFD_SESSION_PARALLEL=2", "TFD_SESSIONS_GROW=100"}})
	if err != nil {
		t.Fatalf("a stray variable stopped the load: %v", err)
	}
	if eff.Config.Sessions.Grow != 100 || eff.Config.Sessions.Parallel != "auto" {
		t.Errorf("sessions %+v", eff.Config.Sessions)
	}
	if len(eff.Warnings) != 1 || strings.Contains(eff.Warnings[0], "\n") ||
		!strings.Contains(eff.Warnings[0], "TFD_SESSION_PARALLEL") || !strings.Contains(eff.Warnings[0], "[sessions]") {
		t.Errorf("warnings %q, want one line naming TFD_SESSION_PARALLEL and the sections", eff.Warnings)
	}
	if _, err := Load(Sources{Environ: []string{"TFD_SESSIONS_GROW=lots"}}); err == nil {
		t.Error("a known key with a bad value is no error")
	}
}

func TestWriteTOML(t *testing.T) {
	path := writeFile(t, "[model]\nname = \"gopher \\\"x\\\"\"\n[residency]\nkeep_warm = \"90m\"\n")
	src := Sources{File: path, Environ: []string{"TFD_SAMPLING_TEMPERATURE=0.7"}, Flags: []Flag{{"--listen", "server.listen", "127.0.0.1:1"}}}
	eff, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteTOML(&out, eff); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"[server]\nlisten ",
		`listen = "127.0.0.1:1"    # flag --listen`,
		`name = "gopher \"x\""  # file ` + path,
		`temperature = 0.7        # env TFD_SAMPLING_TEMPERATURE`, // aligned under repetition_penalty
		`keep_warm = "1h30m"  # file`,
		`max_tokens = 4096        # default`,
		"[prompt_cache]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// The output is a config file that gives the same values.
	again, err := Load(Sources{File: writeFile(t, text), FileRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Config != eff.Config {
		t.Errorf("round trip: %+v, want %+v", again.Config, eff.Config)
	}
}
