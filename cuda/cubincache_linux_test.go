//go:build amd64 || arm64

package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCubinCacheKeepsWhatWasWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made", "here")
	key := cubinKey("src", "sm_90a", nvrtcOptions("sm_90a"), "13.0")
	if c := readCubin(dir, key); c != nil {
		t.Fatalf("an empty cache read %d bytes", len(c))
	}
	cubin := bytes.Repeat([]byte("\x7fELF cubin"), 1000)
	if err := writeCubin(dir, key, cubin); err != nil {
		t.Fatal(err)
	}
	if got := readCubin(dir, key); !bytes.Equal(got, cubin) {
		t.Fatalf("read %d bytes back, want the %d written", len(got), len(cubin))
	}
	// A second write of the same key (another process) replaces the file whole.
	other := bytes.Repeat([]byte("other"), 10)
	if err := writeCubin(dir, key, other); err != nil {
		t.Fatal(err)
	}
	if got := readCubin(dir, key); !bytes.Equal(got, other) {
		t.Fatalf("after a second write read %q", got)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestCubinKeyNamesEveryInput(t *testing.T) {
	opts := nvrtcOptions("sm_90a")
	base := cubinKey("src", "sm_90a", opts, "13.0")
	for name, key := range map[string]string{
		"source":       cubinKey("src ", "sm_90a", opts, "13.0"),
		"architecture": cubinKey("src", "sm_90", nvrtcOptions("sm_90a"), "13.0"),
		"options":      cubinKey("src", "sm_90a", append(nvrtcOptions("sm_90a"), "-G"), "13.0"),
		"NVRTC":        cubinKey("src", "sm_90a", opts, "12.8"),
		// Inputs run together differently: lengths keep them apart.
		"boundaries": cubinKey("srcsm_90a", "", opts, "13.0"),
	} {
		if key == base {
			t.Errorf("a different %s gives the same key %s", name, key)
		}
	}
	if again := cubinKey("src", "sm_90a", nvrtcOptions("sm_90a"), "13.0"); again != base {
		t.Errorf("the same inputs give %s, then %s", base, again)
	}
}

func TestCubinCacheIgnoresDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	key := cubinKey("src", "sm_90", nil, "13.0")
	cubin := bytes.Repeat([]byte{1, 2, 3, 4}, 256)
	path := filepath.Join(dir, key+".cubin")
	for name, damage := range map[string]func([]byte) []byte{
		"cut short":     func(b []byte) []byte { return b[:len(b)-1] },
		"a byte turned": func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		"header only":   func(b []byte) []byte { return b[:len(cubinMagic)] },
		"another magic": func(b []byte) []byte { b[0] = 'T'; return b },
		"empty":         func([]byte) []byte { return nil },
	} {
		if err := writeCubin(dir, key, cubin); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := readCubin(dir, key); got != nil {
			t.Errorf("%s: read %d bytes, want none", name, len(got))
		}
	}
}

func TestCubinCacheReportsAFolderItCannotMake(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeCubin(filepath.Join(file, "cuda"), "k", []byte{1}); err == nil {
		t.Error("writing under a file succeeded")
	}
	if err := writeCubin(t.TempDir(), "k", nil); err == nil {
		t.Error("an empty CUBIN was cached")
	}
}

func TestCubinCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/home/u/.cache")
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TFD_CUDA_CACHE": "/srv/kernels", "CACHE_DIRECTORY": "/var/cache/tfd"}, "/srv/kernels"},
		{map[string]string{"TFD_CUDA_CACHE": "off", "CACHE_DIRECTORY": "/var/cache/tfd"}, ""},
		{map[string]string{"TFD_CUDA_CACHE": "0"}, ""},
		{map[string]string{"CACHE_DIRECTORY": "/var/cache/tfd:/var/cache/other"}, "/var/cache/tfd/cuda"},
		{map[string]string{}, "/home/u/.cache/tfd/cuda"},
	} {
		if got := cubinCacheDir(env(c.env)); got != c.want {
			t.Errorf("cubinCacheDir(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

func TestCubinCacheKeepsTheNewest(t *testing.T) {
	dir := t.TempDir()
	var keys []string
	for i := range cubinsKept + 3 {
		key := cubinKey("src", "sm_90a", nil, string(rune('a'+i)))
		keys = append(keys, key)
		if err := writeCubin(dir, key, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		// Modification times a second apart, whatever the file system's resolution.
		at := time.Unix(1_700_000_000+int64(i), 0)
		if err := os.Chtimes(filepath.Join(dir, key+".cubin"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	// A write that died an hour and more ago left its temporary file; one under way now has its.
	dead, live := filepath.Join(dir, "dead-1.tmp"), filepath.Join(dir, "live-1.tmp")
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte{1}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(dead, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	pruneCubins(dir, cubinsKept)
	if _, err := os.Stat(dead); err == nil {
		t.Error("a dead write's temporary file was left")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live write's temporary file was removed: %v", err)
	}
	for i, key := range keys {
		kept := readCubin(dir, key) != nil
		if want := i >= len(keys)-cubinsKept; kept != want {
			t.Errorf("CUBIN %d of %d: kept %v, want %v", i+1, len(keys), kept, want)
		}
	}
}
