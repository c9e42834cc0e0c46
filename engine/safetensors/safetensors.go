// Package safetensors reads model weights in the safetensors format: a single model.safetensors
// file or shards listed in model.safetensors.index.json.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of JSON describing each
// tensor (dtype, shape, and the byte range of its data relative to the end of the header), then the
// tensor data. Parse validates the header against the data it describes, so a damaged or truncated
// download is reported when the model is opened, not as garbage logits later.
//
// Tensors alias the bytes they were parsed from: with Open those are read-only memory mappings, so
// opening a large checkpoint costs address space, not resident memory, until the weights are read.
package safetensors

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Tensor is one named tensor of a checkpoint.
//
// Data holds the tensor's elements in little-endian, row-major order. It aliases the file's bytes
// (for Open, a read-only memory mapping): callers must not write to it, and must not use it after
// the Checkpoint it came from is closed. Data may not be aligned to the element size.
type Tensor struct {
	Name  string
	DType string // as spelled in the header: "F32", "F16", "BF16", "I64", ...
	Shape []int  // empty for a scalar
	Data  []byte
}

// Elements returns the number of elements the shape describes (1 for a scalar).
func (t Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// dtypeBits gives the size in bits of one element of each dtype the format defines. Compute uses
// only F32, F16 and BF16, but a header may name the others (token-type tables in I64, masks in BOOL,
// quantized checkpoints in F8 and F4), so they parse.
var dtypeBits = map[string]int{
	"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
	"I16": 16, "U16": 16, "F16": 16, "BF16": 16,
	"I32": 32, "U32": 32, "F32": 32,
	"I64": 64, "U64": 64, "F64": 64, "C64": 64,
	"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

// maxHeaderLen bounds the JSON header, as the reference implementation does (100 MB): a larger
// length means the file is not safetensors at all, and reading it would waste memory.
const maxHeaderLen = 100_000_000

// metadataKey is the header entry that holds free-form string metadata rather than a tensor.
const metadataKey = "__metadata__"

// headerEntry is one tensor's description in a file's JSON header.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Parse validates one safetensors file's bytes and returns its tensors by name. The tensors alias
// data. name identifies the file in errors (a path or file name); it is not opened.
//
// Parse checks everything the header claims: the header length fits the file, the header is a
// JSON object, each dtype is known, each shape times its dtype's size equals its byte range, and
// the byte ranges lie inside the data area without overlapping. A `__metadata__` entry is allowed
// and ignored.
func Parse(name string, data []byte) (map[string]Tensor, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("safetensors: %s: file is %d bytes, shorter than the 8-byte header length: "+
			"the file is empty or truncated; re-download or re-export the checkpoint", name, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeaderLen {
		return nil, fmt.Errorf("safetensors: %s: header length %d exceeds the format's limit of %d bytes: "+
			"not a safetensors file", name, n, maxHeaderLen)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("safetensors: %s: header length %d reaches past the end of the %d-byte file: "+
			"not a safetensors file, or truncated; re-download or re-export the checkpoint", name, n, len(data))
	}
	header, body := data[8:8+n], data[8+n:]

	var entries map[string]json.RawMessage
	err := json.Unmarshal(header, &entries)
	if err == nil && entries == nil {
		err = fmt.Errorf("it is %s", header)
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: header is not a JSON object (%v): "+
			"not a safetensors file, or corrupt; re-download or re-export the checkpoint", name, err)
	}

	tensors := make(map[string]Tensor, len(entries))
	spans := make([]span, 0, len(entries))
	for _, tname := range slices.Sorted(maps.Keys(entries)) { // sorted, so errors are repeatable
		if tname == metadataKey {
			continue
		}
		t, sp, err := parseEntry(name, tname, entries[tname])
		if err != nil {
			return nil, err
		}
		tensors[tname] = t
		spans = append(spans, sp)
	}
	if err := checkSpans(name, spans, int64(len(body))); err != nil {
		return nil, err
	}
	for _, sp := range spans {
		t := tensors[sp.name]
		t.Data = body[sp.begin:sp.end:sp.end]
		tensors[sp.name] = t
	}
	return tensors, nil
}

// span is the byte range of one tensor's data, relative to the start of the data area.
type span struct {
	name       string
	begin, end int64
}

// parseEntry decodes and checks one tensor's header entry; the caller checks its span against the
// data area and the other tensors.
func parseEntry(file, tname string, raw json.RawMessage) (Tensor, span, error) {
	var e headerEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return Tensor{}, span{}, fmt.Errorf("safetensors: %s: tensor %q: malformed header entry (%v): "+
			"re-download or re-export the checkpoint", file, tname, err)
	}
	bits, ok := dtypeBits[e.DType]
	if !ok {
		return Tensor{}, span{}, fmt.Errorf("safetensors: %s: tensor %q has unknown dtype %q (known: %s): "+
			"the file is corrupt or from a newer format; re-export the checkpoint", file, tname, e.DType,
			strings.Join(knownDTypes(), ", "))
	}
	if len(e.DataOffsets) != 2 || e.DataOffsets[0] < 0 || e.DataOffsets[1] < e.DataOffsets[0] {
		return Tensor{}, span{}, fmt.Errorf("safetensors: %s: tensor %q has data_offsets %v, want [begin, end] "+
			"with 0 <= begin <= end: re-download or re-export the checkpoint", file, tname, e.DataOffsets)
	}
	shape := make([]int, len(e.Shape))
	elems := int64(1)
	for i, d := range e.Shape {
		// The bound keeps elems*bits below 2^63 for any shape a real file can hold.
		if d < 0 || (d > 0 && elems > (1<<56)/d) {
			return Tensor{}, span{}, fmt.Errorf("safetensors: %s: tensor %q has impossible shape %v: "+
				"re-download or re-export the checkpoint", file, tname, e.Shape)
		}
		shape[i] = int(d)
		elems *= d
	}
	sp := span{name: tname, begin: e.DataOffsets[0], end: e.DataOffsets[1]}
	if elems*int64(bits)%8 != 0 {
		return Tensor{}, span{}, fmt.Errorf("safetensors: %s: tensor %q: shape %v of %s (%d bits each) "+
			"is not a whole number of bytes: re-export the checkpoint", file, tname, e.Shape, e.DType, bits)
	}
	if want := elems * int64(bits) / 8; want != sp.end-sp.begin {
		return Tensor{}, span{}, fmt.Errorf("safetensors: %s: tensor %q: shape %v of %s needs %d bytes, "+
			"but data_offsets [%d, %d] span %d: the header is corrupt; re-download or re-export the checkpoint",
			file, tname, e.Shape, e.DType, want, sp.begin, sp.end, sp.end-sp.begin)
	}
	return Tensor{Name: tname, DType: e.DType, Shape: shape}, sp, nil
}

// checkSpans checks that the tensors' byte ranges lie inside a data area of size dataLen and do
// not overlap. Gaps are allowed (the reference writer leaves none, but padding harms nobody).
//
// A file cut short during download keeps an intact header that describes more data than is
// present; that case is told apart from a corrupt header so the message can say what happened.
func checkSpans(file string, spans []span, dataLen int64) error {
	slices.SortFunc(spans, func(a, b span) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	})
	var prev span      // the last non-empty range seen
	contiguous := true // whether each non-empty range starts where the previous one ended
	for _, sp := range spans {
		if sp.begin == sp.end {
			continue // an empty tensor occupies no bytes and overlaps nothing
		}
		if sp.begin < prev.end {
			return fmt.Errorf("safetensors: %s: tensors %q [%d, %d] and %q [%d, %d] overlap: "+
				"the header is corrupt; re-download or re-export the checkpoint",
				file, prev.name, prev.begin, prev.end, sp.name, sp.begin, sp.end)
		}
		contiguous = contiguous && sp.begin == prev.end
		prev = sp
	}
	var outside []span
	maxEnd := int64(0)
	for _, sp := range spans {
		maxEnd = max(maxEnd, sp.end)
		if sp.end > dataLen {
			outside = append(outside, sp)
		}
	}
	if len(outside) == 0 {
		return nil
	}
	if contiguous && maxEnd == prev.end {
		// The header lays the tensors end to end from offset 0 and only the tail is missing.
		return fmt.Errorf("safetensors: %s: file is truncated: its header describes %d bytes of tensor data "+
			"but only %d follow the header (%d missing); re-download the checkpoint",
			file, prev.end, dataLen, prev.end-dataLen)
	}
	sp := outside[0]
	return fmt.Errorf("safetensors: %s: tensor %q has data_offsets [%d, %d] outside the %d-byte data area: "+
		"the header is corrupt or the file truncated; re-download or re-export the checkpoint",
		file, sp.name, sp.begin, sp.end, dataLen)
}

// knownDTypes returns the dtype names Parse accepts, sorted, for error messages.
func knownDTypes() []string {
	names := make([]string, 0, len(dtypeBits))
	for k := range dtypeBits {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
