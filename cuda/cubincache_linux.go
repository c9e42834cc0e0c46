//go:build amd64 || arm64

package cuda

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The kernels' CUBIN is kept on disk between processes. NVRTC compiles every kernel at a
// process's first backend, which takes tens of seconds on the H200 machine (the first test of a
// test process there takes 45-50 s, the same test 0.3 s after another), paid at the service's
// every start and by every test or benchmark process, while the CUBIN depends only on what was
// compiled and how: the source, the architecture, the options and the NVRTC that compiled it
// (nvrtcIdentity), which cubinKey hashes. A file holds a header, the CUBIN's SHA-256 and the CUBIN, so a file cut short
// or damaged reads as absent and is compiled and written again.

// cubinMagic starts every cached CUBIN file.
const cubinMagic = "tfd cubin 1\n"

// cubinsKept is how many CUBINs a cache folder keeps, the newest: one for each build of tfd run
// lately (a new build's kernels are a new key), and no more piling up at every upgrade.
const cubinsKept = 4

// cubinCacheDir is the folder for cached CUBINs, or "" for none: $TFD_CUDA_CACHE ("off" or "0":
// none), else the cuda folder of systemd's CacheDirectory for the service ($CACHE_DIRECTORY, its
// first folder), else of the user's cache folder (os.UserCacheDir: ~/.cache/tfd/cuda on Linux).
func cubinCacheDir(getenv func(string) string) string {
	switch d := getenv("TFD_CUDA_CACHE"); d {
	case "off", "0":
		return ""
	case "":
	default:
		return d
	}
	if d, _, _ := strings.Cut(getenv("CACHE_DIRECTORY"), ":"); d != "" {
		return filepath.Join(d, "cuda")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "tfd", "cuda")
}

// cubinKey names the CUBIN the NVRTC named nvrtc makes of src for arch with opts.
func cubinKey(src, arch string, opts []string, nvrtc string) string {
	h := sha256.New()
	for _, s := range append([]string{src, arch, nvrtc}, opts...) {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return arch + "-" + hex.EncodeToString(h.Sum(nil)[:12])
}

// readCubin returns the CUBIN cached in dir under key, or nil if there is none or the file does
// not hold what writeCubin wrote.
func readCubin(dir, key string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, key+".cubin"))
	if err != nil || len(b) <= len(cubinMagic)+sha256.Size || string(b[:len(cubinMagic)]) != cubinMagic {
		return nil
	}
	sum, cubin := b[len(cubinMagic):len(cubinMagic)+sha256.Size], b[len(cubinMagic)+sha256.Size:]
	if got := sha256.Sum256(cubin); !bytes.Equal(got[:], sum) {
		return nil
	}
	return cubin
}

// writeCubin caches cubin in dir under key, making dir if need be. The file is written under a
// temporary name and renamed into place, so that a process reading it at the same time (another
// test binary, a second backend) finds the old file, none, or the whole new one.
func writeCubin(dir, key string, cubin []byte) (err error) {
	if len(cubin) == 0 {
		return errors.New("cuda: no CUBIN to cache")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cuda: caching the kernels: %w", err)
	}
	f, err := os.CreateTemp(dir, key+"-*.tmp")
	if err != nil {
		return fmt.Errorf("cuda: caching the kernels: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	sum := sha256.Sum256(cubin)
	for _, b := range [][]byte{[]byte(cubinMagic), sum[:], cubin} {
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("cuda: caching the kernels: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cuda: caching the kernels: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, key+".cubin")); err != nil {
		return fmt.Errorf("cuda: caching the kernels: %w", err)
	}
	pruneCubins(dir, cubinsKept)
	return nil
}

// pruneCubins removes all but the keep newest CUBINs in dir (by modification time), and the
// temporary files of writes that died over an hour ago, as far as it can: a file another process
// removed first, or one it cannot remove, is left to the next prune.
func pruneCubins(dir string, keep int) {
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	for _, p := range tmps {
		if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.Remove(p)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.cubin"))
	type file struct {
		path string
		mod  int64
	}
	var files []file
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			files = append(files, file{p, fi.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(b.mod, a.mod) })
	for _, f := range files[min(keep, len(files)):] {
		os.Remove(f.path)
	}
}
