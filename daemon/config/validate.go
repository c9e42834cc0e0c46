package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"tfd/batch"
)

// problem is one invalid value: its key and what the key allows.
type problem struct {
	key  string
	want string
}

// problems lists the invalid values of c in schema order. [Load] reports them, adding where
// each value came from.
func (c Config) problems() []problem {
	var ps []problem
	check := func(ok bool, key, want string) bool {
		if !ok {
			ps = append(ps, problem{key, want})
		}
		return ok
	}
	if check(validListen(c.Server.Listen), "server.listen", `want host:port with a port from 0 to 65535, e.g. "127.0.0.1:8417"`) {
		check(c.Server.APIKeysFile != "" || c.Server.AllowOpen || loopbackListen(c.Server.Listen), "server.listen",
			"not a loopback address, and server.api_keys_file is empty: anyone who reaches this machine could use the model; "+
				"set server.api_keys_file (a file of keys, one a line), or listen on 127.0.0.1, or set server.allow_open = true to serve without keys")
	}
	check(c.Server.StallTimeout >= 0, "server.stall_timeout", `want a duration ≥ 0, e.g. "60s" ("0s": never cancel a stream whose client stalls)`)
	check(c.Server.ShutdownTimeout >= 0, "server.shutdown_timeout", "want a duration ≥ 0")

	check(oneOf(c.Model.Backend, "auto", "metal", "cuda", "cpu"), "model.backend", "want one of auto, metal, cuda, cpu")
	check(c.Model.Context >= 0, "model.context", "want 0 (the model's window) or a positive number of tokens")
	check(oneOf(c.Model.Quantize, "", "q8", "q4"), "model.quantize", `want "" (the checkpoint's dtypes), "q8" or "q4"`)

	_, _, err := c.Sessions.ParallelN()
	check(err == nil, "sessions.parallel", `want "auto" or a whole number ≥ 1`)
	_, err = batch.ParseLayout(c.Sessions.Layout)
	check(err == nil, "sessions.layout", `want empty or a comma-separated list of capacities, each N or NxCOUNT, e.g. "65536,32768x3,16384x11"`)
	check(c.Sessions.Grow > 0, "sessions.grow", "want a positive number of tokens")
	check(c.Sessions.Queue > 0, "sessions.queue", "want a positive number of requests")
	check(oneOf(c.Sessions.KVCache, "f32", "f16"), "sessions.kv_cache", `want "f32" (exact) or "f16" (half the memory)`)

	check(c.Memory.LoadLimitGB >= 0, "memory.load_limit_gb", "want 0 (70% of memory) or a positive number of GB")
	check(c.Memory.MarginGB >= 0, "memory.margin_gb", "want a number of GB ≥ 0")

	check(c.PromptCache.GiB == -1 || c.PromptCache.GiB >= 0, "prompt_cache.gib", "want -1 (a default share), 0 (off) or a positive number of GiB")
	check(c.PromptCache.SpillGiB >= 0, "prompt_cache.spill_gib", "want a number of GiB ≥ 0")
	check(c.PromptCache.SpillDir == "" || c.PromptCache.SpillGiB > 0, "prompt_cache.spill_gib", "prompt_cache.spill_dir is set: say how many GiB the spill folder may hold")
	check(c.PromptCache.SpillDir != "" || c.PromptCache.SpillGiB == 0, "prompt_cache.spill_dir", "prompt_cache.spill_gib is set: name the folder to spill to")

	check(c.Drafts.MTPMax >= 0 && c.Drafts.MTPMax <= 16, "drafts.mtp_max", "want a whole number from 0 to 16")
	check(c.Drafts.NGramMax >= 0 && c.Drafts.NGramMax <= 16, "drafts.ngram_max", "want a whole number from 0 to 16")

	s := c.Sampling
	check(s.Temperature == -1 || (s.Temperature >= 0 && s.Temperature <= 2), "sampling.temperature", "want -1 (unset) or a number from 0 to 2")
	check(s.TopP == -1 || (s.TopP > 0 && s.TopP <= 1), "sampling.top_p", "want -1 (unset) or a number in (0, 1]")
	check(s.TopK >= -1, "sampling.top_k", "want -1 (unset), 0 (off) or a positive whole number")
	check(s.MinP == -1 || (s.MinP >= 0 && s.MinP <= 1), "sampling.min_p", "want -1 (unset) or a number from 0 to 1")
	check(s.RepetitionPenalty == -1 || s.RepetitionPenalty > 0, "sampling.repetition_penalty", "want -1 (unset) or a number above 0 (1 is off)")
	check(s.MaxTokens > 0, "sampling.max_tokens", "want a positive number of tokens")

	check(c.Residency.KeepWarm >= 0, "residency.keep_warm", "want a duration ≥ 0")
	check(c.Residency.Tick >= 10*time.Millisecond, "residency.tick", "want a duration of at least 10ms (macOS takes idle GPU memory back after about a second: 500ms keeps ahead of it)")
	check(oneOf(c.Log.Level, "debug", "info", "warn", "error"), "log.level", "want one of debug, info, warn, error")
	return ps
}

// ParallelN reads sessions.parallel: auto reports true for "auto", else n is the number of
// replies that run at once (≥ 1).
func (s SessionsConfig) ParallelN() (n int, auto bool, err error) {
	if strings.EqualFold(strings.TrimSpace(s.Parallel), "auto") {
		return 0, true, nil
	}
	n, err = strconv.Atoi(strings.TrimSpace(s.Parallel))
	if err != nil || n < 1 {
		return 0, false, fmt.Errorf(`sessions.parallel %q: want "auto" or a whole number ≥ 1`, s.Parallel)
	}
	return n, false, nil
}

func validListen(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p >= 0 && p <= 65535
}

// loopbackListen reports whether addr (a valid host:port) listens on loopback only: localhost
// or a loopback IP. An empty host listens everywhere; other names are not resolved, so they
// count as open.
func loopbackListen(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host, _, _ = strings.Cut(host, "%") // an IPv6 zone
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func oneOf(s string, allowed ...string) bool { return slices.Contains(allowed, s) }
