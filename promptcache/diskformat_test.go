package promptcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// encodeSpillFile returns a whole spill file, as the writer writes it.
func encodeSpillFile(identity string, k Key, tokens []int32, payload []byte) []byte {
	data := append(encodeSpillHeader(identity, k, tokens, len(payload)), payload...)
	return binary.LittleEndian.AppendUint32(data, spillChecksum(data, nil))
}

func TestSpillFileRoundTrip(t *testing.T) {
	k, tokens, payload := testBlock(testIdentity, 3, 777)
	data := encodeSpillFile(testIdentity, k, tokens, payload)
	if int64(len(data)) != spillFileSize(len(testIdentity), len(tokens), len(payload)) {
		t.Errorf("file of %d bytes, spillFileSize says %d", len(data), spillFileSize(len(testIdentity), len(tokens), len(payload)))
	}
	f, err := parseSpillFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.check(testIdentity, k, tokens); err != nil {
		t.Error(err)
	}
	if !bytes.Equal(f.payload, payload) {
		t.Error("payload differs")
	}
	// Every byte is covered: by the structure's checks or the checksum.
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x10
		if f, err := parseSpillFile(bad); err == nil {
			if f.check(testIdentity, k, tokens) == nil {
				t.Fatalf("a flipped bit at byte %d goes unnoticed", i)
			}
		}
	}
}

func TestSpillNames(t *testing.T) {
	k := Key{0xab, 0x01}
	prefix := spillPrefix("m")
	name := spillName(prefix, k)
	if p, got, ok := parseSpillName(name); !ok || p != prefix || got != k {
		t.Errorf("parseSpillName(%q) = %q, %v, %v", name, p, got, ok)
	}
	for _, tt := range []struct {
		name        string
		spill, temp bool
	}{
		{name, true, false},
		{name + ".tmp123", false, true},
		{name + ".tmp", false, false},
		{name + ".tmp12x", false, false},
		{"0123456789ABCDEF-" + k.String() + ".tfdkv", false, false},
		{prefix + "_" + k.String() + ".tfdkv", false, false},
		{prefix + "-" + k.String()[2:] + ".tfdkv", false, false},
		{prefix + "-" + k.String() + ".kv", false, false},
		{"notes.txt", false, false},
		{".tfdkv.tmp1", false, false},
	} {
		if _, _, ok := parseSpillName(tt.name); ok != tt.spill {
			t.Errorf("parseSpillName(%q) ok = %v, want %v", tt.name, ok, tt.spill)
		}
		if got := isSpillTempName(tt.name); got != tt.temp {
			t.Errorf("isSpillTempName(%q) = %v, want %v", tt.name, got, tt.temp)
		}
	}
}

// FuzzParseSpillFile feeds the parser any bytes: it must never panic, every error must say the
// file is bad, and what it accepts must be exactly what the writer would write for its content.
// The seeds run in every go test; go test -fuzz=FuzzParseSpillFile explores further.
func FuzzParseSpillFile(f *testing.F) {
	k, tokens, payload := testBlock(testIdentity, 1, 100)
	valid := encodeSpillFile(testIdentity, k, tokens, payload)
	f.Add(valid)
	f.Add(encodeSpillFile("m", Key{}, nil, nil))
	f.Add(encodeSpillFile("m", Key{1}, []int32{-1, 1 << 30}, []byte{0}))
	for _, n := range []int{0, 4, 8, 12, 14, 30, 60, len(valid) - 104, len(valid) - 5, len(valid) - 1} {
		f.Add(valid[:n])
	}
	for _, i := range []int{8, 12, 13, 48, 50, len(valid) - 105, len(valid) - 100} {
		bad := bytes.Clone(valid)
		bad[i] = 0xff
		f.Add(bad)
	}
	f.Add(append(bytes.Clone(valid), 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parseSpillFile(data)
		if err != nil {
			if !errors.Is(err, ErrBadSpillFile) {
				t.Fatalf("error %v does not wrap ErrBadSpillFile", err)
			}
			return
		}
		again := encodeSpillFile(file.identity, file.key, file.tokens, file.payload)
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted %d bytes that encode back as %d other bytes", len(data), len(again))
		}
		if err := file.check(file.identity, file.key, file.tokens); err != nil {
			t.Fatalf("a file fails the check of its own content: %v", err)
		}
	})
}
