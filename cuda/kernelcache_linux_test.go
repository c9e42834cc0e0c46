//go:build amd64 || arm64

package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestKernelCacheKeepsTheCUBIN: the first start compiles and keeps the CUBIN, a start with the
// same key reads it without compiling, another key compiles its own, a damaged file is compiled
// again and replaced, a folder that cannot be written still gives the compiled CUBIN, and a
// failed compile leaves nothing behind.
func TestKernelCacheKeepsTheCUBIN(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kernels")
	compiles := 0
	build := func(out string) func() ([]byte, error) {
		return func() ([]byte, error) { compiles++; return []byte(out), nil }
	}
	get := func(dir, key, out string) []byte {
		t.Helper()
		b, err := cachedCompile(dir, "sm_90a", key, build(out))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := get(dir, "source A", "cubin A"); string(b) != "cubin A" || compiles != 1 {
		t.Fatalf("first start: %q after %d compiles, want \"cubin A\" after 1", b, compiles)
	}
	if b := get(dir, "source A", "not read"); string(b) != "cubin A" || compiles != 1 {
		t.Fatalf("second start: %q after %d compiles, want the kept \"cubin A\" after 1", b, compiles)
	}
	if b := get(dir, "source B", "cubin B"); string(b) != "cubin B" || compiles != 2 {
		t.Fatalf("another key: %q after %d compiles, want \"cubin B\" after 2", b, compiles)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "sm_90a-*.cubin"))
	if len(files) != 2 {
		t.Fatalf("the cache holds %v, want one file a key", files)
	}
	for _, damage := range []func(b []byte) []byte{
		func(b []byte) []byte { return b[:len(b)-1] },                      // cut short
		func(b []byte) []byte { c := bytes.Clone(b); c[0] ^= 1; return c }, // a bit flipped
		func([]byte) []byte { return nil },                                 // empty
	} {
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if err := os.WriteFile(f, damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := compiles
		if b := get(dir, "source A", "cubin A"); string(b) != "cubin A" || compiles != before+1 {
			t.Fatalf("damaged file: %q after %d compiles, want \"cubin A\" compiled again", b, compiles-before)
		}
		if b := get(dir, "source A", "not read"); string(b) != "cubin A" || compiles != before+1 {
			t.Fatalf("after a damaged file: %q, want the file written again and read", b)
		}
	}

	// A folder that is a file: nothing kept, the compiled CUBIN still given.
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	for i := range 2 {
		before := compiles
		if b := get(notDir, "source A", "cubin A"); string(b) != "cubin A" || compiles != before+1 {
			t.Fatalf("unwritable cache, start %d: %q after %d compiles", i, b, compiles-before)
		}
	}

	// A compile that fails leaves no file.
	failDir := filepath.Join(t.TempDir(), "kernels")
	boom := errors.New("nvrtc: boom")
	if _, err := cachedCompile(failDir, "sm_90a", "source A", func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed compile returned %v, want %v", err, boom)
	}
	if left, _ := os.ReadDir(failDir); len(left) != 0 {
		t.Fatalf("a failed compile left %v", left)
	}

	// No folder: every start compiles.
	before := compiles
	get("", "source A", "cubin A")
	get("", "source A", "cubin A")
	if compiles != before+2 {
		t.Fatalf("no cache folder: %d compiles for two starts, want 2", compiles-before)
	}
}

// TestKernelCachePrunes: the cache keeps the keptKernels most recently used CUBINs, a read
// counting as a use, and removes the rest when it writes one.
func TestKernelCachePrunes(t *testing.T) {
	dir := t.TempDir()
	build := func() ([]byte, error) { return []byte("cubin"), nil }
	get := func(key string) {
		t.Helper()
		if _, err := cachedCompile(dir, "sm_90a", key, build); err != nil {
			t.Fatal(err)
		}
	}
	age := func(key string, ago time.Duration) { // backdate key's file, as if last used ago
		t.Helper()
		at := time.Now().Add(-ago)
		if err := os.Chtimes(filepath.Join(dir, cachedName("sm_90a", key)), at, at); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range []string{"a", "b", "c", "d"} {
		get(key)
		age(key, time.Duration(10-i)*time.Hour) // a oldest, d newest
	}
	get("a") // a read: now the newest
	get("e") // a fifth: b, the least recently used, goes
	var kept []string
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		if _, err := os.Stat(filepath.Join(dir, cachedName("sm_90a", key))); err == nil {
			kept = append(kept, key)
		}
	}
	if want := []string{"a", "c", "d", "e"}; !slices.Equal(kept, want) {
		t.Fatalf("the cache kept %v, want %v", kept, want)
	}
}

// TestKernelCacheDir: $TFD_KERNEL_CACHE first ("off": none), then systemd's CacheDirectory=
// ($CACHE_DIRECTORY, the first of several), then the user's cache folder.
func TestKernelCacheDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	for _, tc := range []struct{ tfd, systemd, want string }{
		{"/srv/k", "/var/cache/tfd", "/srv/k"},
		{"off", "/var/cache/tfd", ""},
		{"", "/var/cache/tfd", "/var/cache/tfd/kernels"},
		{"", "/var/cache/tfd:/var/cache/other", "/var/cache/tfd/kernels"},
		{"", "", filepath.Join(home, "cache", "tfd", "kernels")},
	} {
		t.Setenv("TFD_KERNEL_CACHE", tc.tfd)
		t.Setenv("CACHE_DIRECTORY", tc.systemd)
		if got := kernelCacheDir(); got != tc.want {
			t.Errorf("TFD_KERNEL_CACHE=%q CACHE_DIRECTORY=%q: %q, want %q", tc.tfd, tc.systemd, got, tc.want)
		}
	}
}
