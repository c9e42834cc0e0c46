package promptcache

import (
	"log/slog"
	"testing"
)

// benchBlockBytes is about one block of an 8B-shaped model with an F32 cache: 64 tokens × 36
// layers × keys and values × 8 heads × 128 × 4 bytes.
const benchBlockBytes = 64 * 36 * 2 * 8 * 128 * 4

func openBenchDisk(b *testing.B) *Disk {
	d, err := OpenDisk(DiskOptions{Dir: b.TempDir(), Limit: 1 << 30, Identity: testIdentity, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// BenchmarkDiskGet reads one block back (from the page cache, as a warm folder serves it) and
// checks it.
func BenchmarkDiskGet(b *testing.B) {
	d := openBenchDisk(b)
	k, tokens, payload := testBlock(testIdentity, 1, benchBlockBytes)
	d.Put(k, tokens, payload)
	d.Flush()
	b.SetBytes(benchBlockBytes)
	for b.Loop() {
		if _, err := d.Get(k, tokens); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiskPut writes blocks through the queue, one at a time.
func BenchmarkDiskPut(b *testing.B) {
	d := openBenchDisk(b)
	_, tokens, payload := testBlock(testIdentity, 1, benchBlockBytes)
	b.SetBytes(benchBlockBytes)
	i := 0
	for b.Loop() {
		i++
		tokens[0] = int32(i)
		d.Put(Keys(testIdentity, tokens)[0], tokens, payload)
		d.Flush()
	}
}
