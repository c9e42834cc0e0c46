package promptcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// A spill file holds one block. Its name is <prefix>-<key>.tfdkv, where prefix is the first 16
// hex digits of the SHA-256 of the model's identity (a hash, not the identity itself, so that any
// identity string makes a name, and two that share a start do not share a prefix) and key is the
// block's Key in hex. The name is only an index: the file carries the full identity and key, and
// a file is used only when both match.
//
// Format version 1; integers are little-endian:
//
//	offset       size  field
//	0            8     magic "tfdkv\r\n\x1a" (the \r\n and ^Z catch a text-mode copy)
//	8            4     format version, 1
//	12           2     identity length n, 1 … 65535
//	14           n     the model's identity
//	14+n         16    the block's key
//	30+n         4     token count c
//	34+n         4·c   the block's tokens, int32
//	34+n+4c      8     payload length p
//	42+n+4c      p     payload: the block as Store.Read wrote it
//	42+n+4c+p    4     CRC-32C (Castagnoli) of every byte before it
const (
	spillMagic   = "tfdkv\r\n\x1a"
	spillVersion = 1
	spillExt     = ".tfdkv"
	// spillTempSuffix follows a spill file's name in the name of its temporary file, and a random
	// number follows it (os.CreateTemp's "*").
	spillTempSuffix = ".tmp"
	prefixLen       = 16
	maxIdentity     = 1<<16 - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSpillFile is wrapped by Get's error for a file it found corrupt, truncated, foreign or
// unreadable, and deleted; errors.Is finds it. Like ErrNotSpilled, it is a miss.
var ErrBadSpillFile = errors.New("promptcache: bad spill file")

// spillPrefix returns the start of the names of identity's spill files.
func spillPrefix(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:])[:prefixLen]
}

// spillName returns the name of the spill file of block k under prefix.
func spillName(prefix string, k Key) string {
	return prefix + "-" + k.String() + spillExt
}

// parseSpillName splits a spill file's name into its prefix and key; ok is false for a name
// that is not one (only lower-case hex, as spillName writes).
func parseSpillName(name string) (prefix string, k Key, ok bool) {
	base, found := strings.CutSuffix(name, spillExt)
	if !found || len(base) != prefixLen+1+2*len(k) || base[prefixLen] != '-' {
		return "", Key{}, false
	}
	prefix, keyHex := base[:prefixLen], base[prefixLen+1:]
	if !isLowerHex(prefix) || !isLowerHex(keyHex) {
		return "", Key{}, false
	}
	hex.Decode(k[:], []byte(keyHex))
	return prefix, k, true
}

// isSpillTempName reports whether name is a temporary file of a spill file being written.
func isSpillTempName(name string) bool {
	base, random, found := strings.Cut(name, spillExt+spillTempSuffix)
	if !found || random == "" || strings.Trim(random, "0123456789") != "" {
		return false
	}
	_, _, ok := parseSpillName(base + spillExt)
	return ok
}

func isLowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// spillHeaderSize returns the bytes of a header naming an identity of idLen bytes and nTokens
// tokens; the file is that, the payload and 4 bytes of checksum.
func spillHeaderSize(idLen, nTokens int) int64 {
	return int64(8+4+2+idLen+16+4+8) + 4*int64(nTokens)
}

// spillFileSize returns the bytes of a spill file.
func spillFileSize(idLen, nTokens, payloadLen int) int64 {
	return spillHeaderSize(idLen, nTokens) + int64(payloadLen) + 4
}

// encodeSpillHeader returns a spill file's header; the caller checks that identity is 1 to
// maxIdentity bytes.
func encodeSpillHeader(identity string, k Key, tokens []int32, payloadLen int) []byte {
	h := make([]byte, 0, spillHeaderSize(len(identity), len(tokens)))
	h = append(h, spillMagic...)
	h = binary.LittleEndian.AppendUint32(h, spillVersion)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(identity)))
	h = append(h, identity...)
	h = append(h, k[:]...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(tokens)))
	for _, t := range tokens {
		h = binary.LittleEndian.AppendUint32(h, uint32(t))
	}
	return binary.LittleEndian.AppendUint64(h, uint64(payloadLen))
}

// spillChecksum returns the CRC-32C of a file's header and payload, the file's last 4 bytes.
func spillChecksum(header, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, header), castagnoli, payload)
}

// spillFile is a spill file's content, as parseSpillFile read it.
type spillFile struct {
	identity string
	key      Key
	tokens   []int32
	payload  []byte // a slice of the data parsed
}

// parseSpillFile reads a whole spill file. It checks the file's structure and checksum, not whose
// it is (spillFile.check does). It never panics, whatever data holds: every length is checked
// against what is left before it is used.
func parseSpillFile(data []byte) (spillFile, error) {
	var f spillFile
	r := spillReader{data: data}
	if magic := r.bytes(len(spillMagic)); r.short || string(magic) != spillMagic {
		return f, fmt.Errorf("%w: not a spill file (no tfdkv magic)", ErrBadSpillFile)
	}
	if v := r.uint32(); r.short {
		return f, fmt.Errorf("%w: truncated header", ErrBadSpillFile)
	} else if v != spillVersion {
		return f, fmt.Errorf("%w: format version %d, this tfd reads %d", ErrBadSpillFile, v, spillVersion)
	}
	idLen := int(r.uint16())
	f.identity = string(r.bytes(idLen))
	copy(f.key[:], r.bytes(len(f.key)))
	nTokens := int64(r.uint32())
	if r.short || idLen == 0 || nTokens*4 > int64(len(r.data)) {
		return f, fmt.Errorf("%w: truncated or malformed header", ErrBadSpillFile)
	}
	tokenBytes := r.bytes(int(nTokens) * 4)
	payloadLen := r.uint64()
	if r.short {
		return f, fmt.Errorf("%w: truncated header", ErrBadSpillFile)
	}
	if left := uint64(len(r.data)); left < 4 || payloadLen != left-4 {
		return f, fmt.Errorf("%w: payload of %d bytes in a file that holds %d after the header (truncated or padded)",
			ErrBadSpillFile, payloadLen, max(int64(left)-4, 0))
	}
	f.payload = r.bytes(int(payloadLen))
	end := len(data) - 4
	if want, got := binary.LittleEndian.Uint32(data[end:]), spillChecksum(data[:end], nil); got != want {
		return spillFile{}, fmt.Errorf("%w: checksum %08x, the file says %08x (corrupt)", ErrBadSpillFile, got, want)
	}
	f.tokens = make([]int32, nTokens)
	for i := range f.tokens {
		f.tokens[i] = int32(binary.LittleEndian.Uint32(tokenBytes[4*i:]))
	}
	return f, nil
}

// check reports whether f is the block k of identity over tokens; a file that is not is foreign,
// or under another key's name.
func (f spillFile) check(identity string, k Key, tokens []int32) error {
	switch {
	case f.identity != identity:
		return fmt.Errorf("%w: another model's or tfd version's block (identity %q)", ErrBadSpillFile, abbreviate(f.identity, 40))
	case f.key != k:
		return fmt.Errorf("%w: holds block %s, not the block its name says", ErrBadSpillFile, f.key)
	case !slices.Equal(f.tokens, tokens):
		return fmt.Errorf("%w: holds other tokens than the prompt's (%d tokens, %d asked)", ErrBadSpillFile, len(f.tokens), len(tokens))
	}
	return nil
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// spillReader takes fields off the front of data; once a field is past the end, short is set and
// every field after reads as zero.
type spillReader struct {
	data  []byte
	short bool
}

func (r *spillReader) bytes(n int) []byte {
	if r.short || n > len(r.data) {
		r.short = true
		return nil
	}
	b := r.data[:n]
	r.data = r.data[n:]
	return b
}

func (r *spillReader) uint16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *spillReader) uint32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *spillReader) uint64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
