package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"

	"tfd/kernels"
)

// identityPrefix is how many bytes of each tensor's data the identity hashes: enough to tell two
// fine-tunes of one architecture apart (their every tensor differs from the first element on),
// cheap enough to compute at every load without reading the weights.
const identityPrefix = 4 << 10

// Identity returns a hex SHA-256 over what makes the model's cached state (its keys and values
// at some positions) valid: config.json's bytes (a GGUF file's header); every tensor's name, dtype,
// shape and first 4 KiB of data; the quantization at load (model.quantize); the backend's name
// and, where it computes in more than one way, which (compute.Arithmetic); and kernels.Version,
// which names the backends' arithmetic; and whether the sessions keep
// their sliding layers in rings, and whether its blocks carry DeltaNet states, which lay a cached
// block out otherwise.
// Two loads that agree on it compute the same bits for the same tokens. It is computed at load.
func (m *Model) Identity() string { return m.identity }

// identity computes Identity from the checkpoint, open at load.
func identity(config []byte, ckpt checkpoint, backend string, q Quantization) string {
	h := sha256.New()
	field(h, []byte("tfd model identity 1"))
	field(h, config)
	number(h, ckpt.count())
	ckpt.each(func(name, dtype string, shape []int, data []byte) {
		field(h, []byte(name))
		field(h, []byte(dtype))
		number(h, len(shape))
		for _, d := range shape {
			number(h, d)
		}
		field(h, data[:min(len(data), identityPrefix)])
	})
	field(h, []byte(q))
	field(h, []byte(backend))
	field(h, []byte(kernels.Version))
	return hex.EncodeToString(h.Sum(nil))
}

// ringedIdentity is the identity of a model whose sessions keep their sliding layers in rings,
// given the identity it has keeping every position.
func ringedIdentity(id string) string {
	return variantIdentity("tfd model identity, sliding layers in rings", id)
}

// variantIdentity is the identity of a model whose cached blocks are laid out as what says,
// given the identity it would have otherwise.
func variantIdentity(what, id string) string {
	h := sha256.New()
	field(h, []byte(what))
	field(h, []byte(id))
	return hex.EncodeToString(h.Sum(nil))
}

// field hashes b after its length, so that no two sequences of fields hash alike.
func field(h hash.Hash, b []byte) {
	number(h, len(b))
	h.Write(b)
}

// number hashes v as 8 bytes, little-endian.
func number(h hash.Hash, v int) {
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(v)))
}
