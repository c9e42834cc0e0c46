//go:build amd64 || arm64

package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The kernels' CUBIN is kept on disk between starts. NVRTC takes 36-62 s to compile tfd's
// kernels on the H200 machine's host (TestKernelsCompile, and a profile of a benchmark's start);
// NVRTC 12.9 and later keep their own cache, but where it cannot write (a service run by a
// systemd DynamicUser, its home folders hidden) every start would pay that again.

// kernelCacheDir returns the folder the CUBIN is kept in: $TFD_KERNEL_CACHE where set ("off":
// none), else the service's cache folder that systemd makes (CacheDirectory=, $CACHE_DIRECTORY),
// else "tfd/kernels" in the user's cache folder (os.UserCacheDir); "" for none.
func kernelCacheDir() string {
	if d := os.Getenv("TFD_KERNEL_CACHE"); d == "off" {
		return ""
	} else if d != "" {
		return d
	}
	if d := os.Getenv("CACHE_DIRECTORY"); d != "" {
		// systemd separates the folders of several CacheDirectory= entries with colons.
		return filepath.Join(strings.Split(d, ":")[0], "kernels")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "tfd", "kernels")
	}
	return ""
}

// cachedCompile returns the CUBIN of the kernels for arch from dir, where an earlier start left
// it for the same source, options and compiler (key), or else from build, which it then keeps
// there. A file that does not end in its own SHA-256 (cut short, overwritten) is compiled again;
// a dir that cannot be written costs only the next start's compile.
func cachedCompile(dir, arch, key string, build func() ([]byte, error)) ([]byte, error) {
	if dir == "" {
		return timedCompile(arch, "", build)
	}
	path := filepath.Join(dir, cachedName(arch, key))
	if b, err := os.ReadFile(path); err == nil {
		if n := len(b) - sha256.Size; n > 0 {
			if check := sha256.Sum256(b[:n]); bytes.Equal(check[:], b[n:]) {
				slog.Info("cuda: kernels read from the cache", "path", path)
				now := time.Now()
				os.Chtimes(path, now, now) // a use, for prune; best effort
				return b[:n], nil
			}
		}
		slog.Warn("cuda: the cached kernels are damaged; compiling them again", "path", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		slog.Warn("cuda: cannot read the cached kernels; compiling them", "path", path, "err", err)
	}
	cubin, err := timedCompile(arch, path, build)
	if err != nil {
		return nil, err
	}
	if err := writeCached(path, cubin); err != nil {
		slog.Warn("cuda: cannot keep the compiled kernels; the next start compiles them again", "path", path, "err", err)
		return cubin, nil
	}
	prune(dir, keptKernels)
	return cubin, nil
}

// keptKernels is how many CUBINs the kernel cache keeps: each build of tfd (or NVRTC, or GPU
// architecture) makes one of about 12 MB, and a few let two builds on one machine (a service and
// a newer tfd being tried) start without compiling, where keeping every one would grow the folder
// by one with each upgrade.
const keptKernels = 4

// prune removes all but the keep most recently used CUBINs in dir (read or written: a read
// touches its file), best effort.
func prune(dir string, keep int) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.cubin"))
	type used struct {
		path string
		at   time.Time
	}
	var all []used
	for _, f := range files {
		if info, err := os.Stat(f); err == nil {
			all = append(all, used{f, info.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b used) int { return b.at.Compare(a.at) })
	for _, u := range all[min(keep, len(all)):] {
		if err := os.Remove(u.path); err == nil {
			slog.Info("cuda: removed kernels no start has used lately from the cache", "path", u.path)
		}
	}
}

// cachedName is the file name of the CUBIN for arch and key.
func cachedName(arch, key string) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("%s-%s.cubin", arch, hex.EncodeToString(sum[:12]))
}

// timedCompile runs build, saying before and after, since it takes most of a minute.
func timedCompile(arch, path string, build func() ([]byte, error)) ([]byte, error) {
	slog.Info("cuda: compiling the kernels with NVRTC; a first start on a machine takes about a minute", "arch", arch, "cache", path)
	start := time.Now()
	cubin, err := build()
	if err == nil {
		slog.Info("cuda: kernels compiled", "arch", arch, "seconds", time.Since(start).Round(100*time.Millisecond).Seconds())
	}
	return cubin, err
}

// writeCached writes cubin and its SHA-256 to path through a file of its own in the same folder,
// renamed into place, so that a reader sees the whole file or none.
func writeCached(path string, cubin []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".cubin-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(cubin)
	_, err = f.Write(append(cubin[:len(cubin):len(cubin)], sum[:]...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
