// Package engine runs decoder-only transformers of the Llama, Qwen and Gemma 3 families, Qwen3's
// mixture of experts and Qwen3-Next's hybrid of gated DeltaNet and attention layers included (a
// hybrid model's sessions carry DeltaNet states, deltastate.go): it reads a Hugging Face model folder (config.json, safetensors weights,
// tokenizer, chat template, generation defaults) or a GGUF file (the same, as llama.cpp's
// metadata and tensors), places the weights on a compute backend, and runs the forward pass over
// rows of many sessions. The forward is written once, against the compute contract.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"tfd/compute"
	"tfd/engine/chattemplate"
	"tfd/engine/safetensors"
	"tfd/engine/tokenizer"
)

// Source names a model: a path on disk, or a file system such as the embedded bundled model.
type Source struct {
	// Dir is the model's path: a Hugging Face folder (config.json, safetensors weights,
	// tokenizer.json), a GGUF file, or a folder that holds exactly one GGUF file and no
	// config.json. The weights are memory-mapped.
	Dir string
	// FS is a Hugging Face folder as a file system; when set, it is read rather than Dir.
	FS   fs.FS
	Name string // the id served in /v1/models; default: the base name of Dir
}

// Options sizes what Load allocates beyond the weights.
type Options struct {
	// Context caps the sequence length; 0 or more than the model's window means the window.
	Context int
	// MaxRows is the most rows one forward takes (prefill chunk plus decode rows); default
	// DefaultMaxRows (ForwardRows chooses it for a backend).
	MaxRows int
	// LogitRows is the most rows of one forward, or of one step of the MTP head, that ask for
	// their logits or their picks; default MaxRows, and never more. Their logits are most of
	// the scratch (a vocabulary's floats a row), so forwards larger than DefaultMaxRows, which
	// only a prompt alone fills, keep it at DefaultMaxRows.
	LogitRows int
	// Slots is the KV pool's size in tokens, shared by all sessions; default Context.
	Slots int
	// Sessions is the most sessions whose state a model keeps at once, beyond their keys and
	// values: a model with sliding-window layers keeps their sliding layers in rings (window.go),
	// a hybrid model (Qwen3-Next) its DeltaNet states (deltastate.go); default DefaultAutoCap.
	// Either is given to a session the first time a forward feeds it, the least recently used
	// one's when none is free. Other models keep nothing beyond their keys and values.
	Sessions int
	// StateDepth is how many of its newest positions' DeltaNet states each session of a hybrid
	// model keeps, so that it can be fed again from any of them; default DefaultStateDepth.
	StateDepth int
	// Quantize quantizes the weight matrices of a 16- or 32-bit checkpoint as they load
	// (model.quantize); the backend must run quantized weights (cpu, cuda and metal do).
	Quantize Quantization
	// KVCache is how the sessions store keys and values (sessions.kv_cache): compute.F32 (or 0,
	// the same) or compute.F16, half the memory, each key and value rounded to F16 as it is
	// stored (compute.KVSpec).
	KVCache compute.DType
	// Progress, if set, is told each loading step.
	Progress func(step string, done, total int)
}

// Model is a loaded model on a backend. It implements scheduler.Model; Forward is not safe for
// concurrent use, the accessors are.
type Model struct {
	name    string
	cfg     Config
	backend compute.Backend

	tok  *tokenizer.Tokenizer
	tmpl *chattemplate.Template // nil when the folder has no chat template
	gen  GenerationConfig

	w        weights
	mtp      *mtpWeights // nil without an MTP head
	mtpShare float64     // what a step of the head reads against a forward of one row (MTPHead.StepShare)
	uploaded []compute.Tensor
	ckpt     checkpoint // open while uploaded tensors use its bytes in place (compute.InPlaceUploader); nil otherwise
	invFreq  compute.Tensor
	// localInvFreq turns the sliding layers' queries and keys (Gemma); nil elsewhere.
	localInvFreq compute.Tensor
	attnScale    float32
	kv           compute.KV
	kvSpec       compute.KVSpec
	// A hybrid model's DeltaNet ops (the backend, where it has them) and its sessions' states;
	// nil in other models.
	deltaOps compute.DeltaNet
	states   *deltaStates
	act      *activations
	identity string
	stores   map[*BlockStore]struct{} // the block stores not yet closed; Close closes them

	// rings keeps the sliding layers' keys and values of each session in a ring bounded by the
	// window (window.go); nil when the pool kv keeps every layer's. fullIndex maps a layer (the
	// MTP layer's after the backbone's) to its index in kv.
	rings     *windowRings
	fullIndex []int

	maxRows, slots, context int
	logitRows               int  // at most maxRows (Options.LogitRows)
	lastPlain               bool // the last layer may run for the wanted rows alone (prune.go)
	headPlain               bool // so may the MTP head's
	lastRows                int  // rows of the last Forward whose hidden states a.x holds
	lastDrafts              int  // logits rows of the last Draft whose MTP outputs (pre-norm) a.h holds
}

// Load reads the model and places it on backend. The caller keeps ownership of backend and
// calls Close on the model when done.
func Load(ctx context.Context, src Source, backend compute.Backend, opts Options) (*Model, error) {
	loc, err := src.locate()
	if err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	m := &Model{name: loc.name, backend: backend}
	ckpt, config, err := m.open(loc)
	if err != nil {
		return nil, err
	}
	if m.cfg.Next.Enabled {
		var ok bool
		if m.deltaOps, ok = backend.(compute.DeltaNet); !ok {
			ckpt.close()
			return nil, fmt.Errorf("engine: %s is a Qwen3-Next model, and the %s backend has no kernels for its gated DeltaNet layers yet: serve it with model.backend = \"cpu\"", loc.where, backend.Name())
		}
	}
	u := newUploader(ckpt, backend, opts.Quantize)
	switch {
	case m.cfg.Gemma.Enabled && loc.gguf == "":
		// A GGUF file holds Gemma's norms as 1 + w already (ggufgemma3.go).
		u.normPlusOne = isGemmaNorm
	case m.cfg.Next.Enabled && loc.gguf == "":
		// A GGUF file holds them as 1 + w already (ggufnext.go).
		u.normPlusOne = isNextNorm
	}
	if u.inPlace != nil {
		m.ckpt = ckpt // its tensors' bytes are the weights: Close closes it after freeing them
	} else {
		defer ckpt.close()
	}
	if err := ctx.Err(); err != nil {
		m.Close()
		return nil, err
	}
	arithmetic := backend.Name()
	if a, ok := backend.(compute.Arithmetic); ok {
		arithmetic += " " + a.Arithmetic()
	}
	m.identity = identity(config, ckpt, arithmetic, opts.Quantize)
	m.w, err = loadWeights(u, m.cfg, func(done, total int) { progress("weights", done, total) })
	body := len(u.uploaded)
	if err == nil {
		m.mtp, err = loadMTP(u, m.cfg)
	}
	if err == nil && m.mtp != nil {
		m.mtpShare = stepShare(m.w, u.uploaded[:body], u.uploaded[body:])
	}
	if err == nil {
		err = ckpt.done()
	}
	m.uploaded = u.uploaded
	if err == nil {
		err = m.allocate(opts)
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	m.lastPlain, m.headPlain = m.plainLast(), m.plainHead()
	if m.rings != nil {
		// A block of the prompt cache holds the sliding layers after the others (blockstore.go),
		// where a model keeping every position holds them in layer order: the same bytes' worth,
		// another layout.
		m.identity = ringedIdentity(m.identity)
	}
	if m.kvSpec.Elem() != compute.F32 {
		// A block holds keys and values in the pool's dtype.
		m.identity = variantIdentity("tfd model identity, keys and values in "+m.kvSpec.Elem().String(), m.identity)
	}
	if m.states != nil {
		// A hybrid model's block carries DeltaNet states after its keys and values, which its
		// blocks did not while the prompt cache was off for it.
		m.identity = variantIdentity("tfd model identity, blocks with DeltaNet states", m.identity)
	}
	return m, nil
}

// located is a Source found: a Hugging Face folder or a GGUF file.
type located struct {
	name  string // the id served
	where string // names the model in errors: its full path on disk, so that a user with several folders of one name knows which
	fsys  fs.FS  // a Hugging Face folder, when gguf is ""
	dir   string // the folder on disk, "" for a file system
	gguf  string // the path of a GGUF file
}

// ggufExt is the extension of GGUF files, compared without regard to case.
const ggufExt = ".gguf"

func (src Source) locate() (located, error) {
	switch {
	case src.FS != nil:
		if src.Name == "" {
			return located{}, errors.New("engine: a model given as a file system needs a name")
		}
		return located{name: src.Name, where: src.Name, fsys: src.FS}, nil
	case src.Dir == "":
		return located{}, errors.New("engine: no model folder given")
	}
	loc := located{name: src.Name, where: src.Dir}
	if loc.name == "" {
		loc.name = filepath.Base(filepath.Clean(src.Dir))
	}
	info, err := os.Stat(src.Dir)
	if err != nil {
		return located{}, fmt.Errorf("engine: model path: %w", err)
	}
	if !info.IsDir() {
		if !strings.EqualFold(filepath.Ext(src.Dir), ggufExt) {
			return located{}, fmt.Errorf("engine: model path %s is a file but not a .gguf file; give a GGUF file or the folder of a Hugging Face model", src.Dir)
		}
		loc.gguf = src.Dir
		return loc, nil
	}
	loc.dir, loc.fsys = src.Dir, os.DirFS(src.Dir)
	if _, err := os.Stat(filepath.Join(src.Dir, "config.json")); err == nil {
		return loc, nil // a Hugging Face folder, whatever else it holds
	}
	ggufs, err := ggufFiles(src.Dir)
	switch {
	case err != nil:
		return located{}, fmt.Errorf("engine: model folder: %w", err)
	case len(ggufs) == 1:
		loc.gguf, loc.fsys, loc.dir = filepath.Join(src.Dir, ggufs[0]), nil, ""
	case len(ggufs) > 1:
		return located{}, fmt.Errorf("engine: %s holds %d GGUF files (%s) and no config.json: name the one to serve in model.path",
			src.Dir, len(ggufs), strings.Join(ggufs, ", "))
	}
	return loc, nil // a folder without config.json is refused when it is read, naming what is missing
}

// ggufFiles lists the GGUF files in dir, sorted.
func ggufFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.EqualFold(filepath.Ext(e.Name()), ggufExt) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// open reads the model's config, tokenizer, chat template and generation defaults, and opens its
// weights. It returns the bytes that define the config, for Identity: config.json's, or a GGUF
// file's header (its metadata and tensor descriptions).
func (m *Model) open(loc located) (checkpoint, []byte, error) {
	if loc.gguf != "" {
		g, err := openGGUF(loc.gguf)
		if err != nil {
			return nil, nil, err
		}
		m.cfg = g.cfg
		if m.tok, m.tmpl, m.gen, err = g.metadata(); err != nil {
			g.close()
			return nil, nil, err
		}
		return g, g.file.Header(), nil
	}
	config, err := m.readMetadata(loc.fsys, loc.where)
	if err != nil {
		return nil, nil, err
	}
	c, err := openSafetensors(loc)
	if err != nil {
		return nil, nil, err
	}
	return safetensorsCheckpoint{c}, config, nil
}

// openSafetensors opens a Hugging Face folder's weights.
func openSafetensors(loc located) (*safetensors.Checkpoint, error) {
	if loc.dir != "" {
		return safetensors.Open(loc.dir)
	}
	return safetensors.OpenFS(loc.fsys)
}

// readConfig reads and checks the folder's config.json, and returns it with its bytes; where
// names the folder in errors.
func readConfig(fsys fs.FS, where string) (Config, []byte, error) {
	raw, err := fs.ReadFile(fsys, "config.json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Config{}, nil, fmt.Errorf("engine: %s has no config.json: give the folder of a Hugging Face model (config.json, safetensors weights, tokenizer.json) or a GGUF file", where)
	case err != nil:
		return Config{}, nil, fmt.Errorf("engine: %s: %w", where, err)
	}
	cfg, err := ParseConfig(raw)
	return cfg, raw, err
}

// readMetadata reads config.json, the tokenizer, the chat template and the generation defaults,
// and returns config.json's bytes; where names the folder in errors.
func (m *Model) readMetadata(fsys fs.FS, where string) (config []byte, err error) {
	if m.cfg, config, err = readConfig(fsys, where); err != nil {
		return nil, err
	}
	raw, err := fs.ReadFile(fsys, "tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("engine: %s: %w", where, err)
	}
	if m.tok, err = tokenizer.Load(raw); err != nil {
		return nil, err
	}
	if raw, err = fs.ReadFile(fsys, "tokenizer_config.json"); err == nil {
		// A folder without a chat template still serves completions; chat requests are refused.
		m.tmpl, _ = chattemplate.FromTokenizerConfig(raw)
	}
	m.gen, err = readGeneration(fsys, m.cfg, m.tok)
	return config, err
}

// allocate places the rotary table, the KV pool and the activations.
func (m *Model) allocate(opts Options) error {
	c := m.cfg
	m.context = c.MaxPositions
	if opts.Context > 0 && opts.Context < m.context {
		m.context = opts.Context
	}
	m.maxRows = opts.MaxRows
	if m.maxRows <= 0 {
		m.maxRows = DefaultMaxRows
	}
	m.logitRows = m.maxRows
	if opts.LogitRows > 0 {
		m.logitRows = min(opts.LogitRows, m.maxRows)
	}
	m.slots = opts.Slots
	if m.slots <= 0 {
		m.slots = m.context
	}
	freqs := invFreq(c.Rope, c.HeadDim)
	if c.Next.Enabled {
		// RoPE turns the first RotaryDim dimensions, permuted at load to RoPE's pairs (see
		// qwen3nextweights.go); the rest get an inverse frequency of 0.
		freqs = append(invFreq(c.Rope, c.Next.RotaryDim), make([]float32, (c.HeadDim-c.Next.RotaryDim)/2)...)
	}
	var err error
	if m.invFreq, err = m.backend.Upload(compute.F32, []int{len(freqs)}, float32Bytes(freqs)); err != nil {
		return fmt.Errorf("engine: upload rotary table: %w", err)
	}
	m.attnScale = attentionScale(c.HeadDim)
	if af := c.Rope.AttentionFactor; c.Rope.Type == "yarn" && af != 1 {
		// transformers multiplies YaRN's cos and sin by the attention factor, which scales every
		// query and key by it: folded here into the scores' scale, af² times the usual one (a
		// difference of rounding only).
		m.attnScale = float32(af * af / math.Sqrt(float64(c.HeadDim)))
	}
	if g := c.Gemma; g.Enabled {
		local := invFreq(g.LocalRope, c.HeadDim)
		if m.localInvFreq, err = m.backend.Upload(compute.F32, []int{len(local)}, float32Bytes(local)); err != nil {
			return fmt.Errorf("engine: upload the sliding layers' rotary table: %w", err)
		}
		// transformers multiplies the scores by query_pre_attn_scalar**-0.5, a float64 that
		// torch rounds to float32.
		m.attnScale = float32(math.Pow(g.QueryPreAttnScalar, -0.5))
	}
	layers := c.Layers
	if m.mtp != nil {
		layers++ // the MTP layer keeps its own keys and values, after the backbone's
	}
	if length := c.RingLength(m.context, m.maxRows); length > 0 {
		sessions := opts.Sessions
		if sessions <= 0 {
			sessions = DefaultAutoCap
		}
		if m.rings, err = newWindowRings(m.backend, c, sessions, length, opts.KVCache); err != nil {
			return err
		}
	}
	full := 0 // the layers that keep every position
	for i := range layers {
		m.fullIndex = append(m.fullIndex, -1)
		if i < c.Layers && c.Next.Enabled && c.Next.Linear[i] {
			continue // a DeltaNet layer keeps states, not keys and values
		}
		if _, inRing := m.rings.sliding(i); !inRing {
			m.fullIndex[i] = full
			full++
		}
	}
	m.kvSpec = compute.KVSpec{Layers: full, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Slots: m.slots, DType: opts.KVCache}
	if m.kv, err = m.backend.NewKV(m.kvSpec); err != nil {
		return fmt.Errorf("engine: allocate KV pool of %d slots: %w", m.slots, err)
	}
	if m.act, err = newActivations(m.backend, c, m.maxRows, m.logitRows); err != nil {
		return err
	}
	if c.Next.Enabled {
		sessions, depth := opts.Sessions, opts.StateDepth
		if sessions <= 0 {
			sessions = DefaultAutoCap
		}
		if depth <= 0 {
			depth = DefaultStateDepth
		}
		m.states, err = newDeltaStates(m.backend, c, sessions, depth, m.maxRows)
		if m.states != nil {
			m.states.dn = m.deltaOps
		}
	}
	return err
}

// Close frees everything the model placed on its backend, its block stores included, and closes
// the checkpoint when the backend uses its bytes in place.
func (m *Model) Close() {
	for s := range m.stores {
		s.Close()
	}
	if m.states != nil {
		m.states.free(m.backend)
		m.states = nil
	}
	if m.act != nil {
		m.act.free(m.backend)
		m.act = nil
	}
	if m.kv != nil {
		m.backend.FreeKV(m.kv)
		m.kv = nil
	}
	if m.rings != nil {
		m.backend.FreeKV(m.rings.kv)
		m.rings = nil
	}
	if m.invFreq != nil {
		m.backend.Free(m.invFreq)
		m.invFreq = nil
	}
	if m.localInvFreq != nil {
		m.backend.Free(m.localInvFreq)
		m.localInvFreq = nil
	}
	for _, t := range m.uploaded {
		m.backend.Free(t)
	}
	m.uploaded = nil
	if m.ckpt != nil {
		m.ckpt.close() // a read-only mapping: unmapping it loses nothing, so its error says nothing to act on
		m.ckpt = nil
	}
}

// Name returns the id the model is served under.
func (m *Model) Name() string { return m.name }

// Config returns the model's normalised config.
func (m *Model) Config() Config { return m.cfg }

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Template returns the model's chat template, or nil when its folder has none.
func (m *Model) Template() *chattemplate.Template { return m.tmpl }

// Generation returns the defaults from generation_config.json.
func (m *Model) Generation() GenerationConfig { return m.gen }

// Vocab returns the length of a logits row.
func (m *Model) Vocab() int { return m.cfg.Vocab }

// MaxRows returns the most rows one Forward takes.
func (m *Model) MaxRows() int { return m.maxRows }

// LogitRows returns the most rows of one Forward (or Draft) that ask for their logits or picks.
func (m *Model) LogitRows() int { return m.logitRows }

// Slots returns the size of the KV pool in tokens.
func (m *Model) Slots() int { return m.slots }

// Context returns the longest sequence the model runs.
func (m *Model) Context() int { return m.context }

// MoveKV copies the keys and values of the n positions of the session at src into the session at
// dst, in every layer: slots src … src+n−1 to dst … of the pool, and the session's sliding-layer
// ring, where it has one, to a ring of dst's. It implements scheduler.Model.
func (m *Model) MoveKV(dst, src, n int) error {
	if n < 0 || src < 0 || dst < 0 || src+n > m.slots || dst+n > m.slots {
		return fmt.Errorf("engine: move %d KV slots from %d to %d: outside the pool of %d", n, src, dst, m.slots)
	}
	if m.rings != nil {
		if err := m.rings.move(m.backend, dst, src, n); err != nil {
			return err
		}
	}
	m.backend.CopyKV(m.kv, dst, m.kv, src, n)
	if m.states != nil {
		m.states.move(m.deltaOps, dst, src, n)
	}
	return nil
}

// fullLayer returns layer's index in the pool that keeps every position.
func (m *Model) fullLayer(layer int) int { return m.fullIndex[layer] }
