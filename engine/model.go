// Package engine runs decoder-only transformers of the Llama and Qwen families: it reads a Hugging
// Face model folder (config.json, safetensors weights, tokenizer, chat template, generation
// defaults), places the weights on a compute backend, and runs the forward pass over rows of many
// sessions. The forward is written once, against the compute contract.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"tfd/compute"
	"tfd/engine/chattemplate"
	"tfd/engine/safetensors"
	"tfd/engine/tokenizer"
)

// Source names a model folder: a directory on disk (its weights are memory-mapped) or a file
// system such as the embedded bundled model.
type Source struct {
	Dir  string
	FS   fs.FS
	Name string // the id served in /v1/models; default: the folder's base name
}

// Options sizes what Load allocates beyond the weights.
type Options struct {
	// Context caps the sequence length; 0 or more than the model's window means the window.
	Context int
	// MaxRows is the most rows one forward takes (prefill chunk plus decode rows); default 256.
	MaxRows int
	// Slots is the KV pool's size in tokens, shared by all sessions; default Context.
	Slots int
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

	w         weights
	mtp       *mtpWeights // nil without an MTP head
	uploaded  []compute.Tensor
	invFreq   compute.Tensor
	attnScale float32
	kv        compute.KV
	kvSpec    compute.KVSpec
	act       *activations
	identity  string
	stores    map[*BlockStore]struct{} // the block stores not yet closed; Close closes them

	maxRows, slots, context int
	lastRows                int // rows of the last Forward whose hidden states a.x holds
	lastDrafts              int // logits rows of the last Draft whose MTP outputs (pre-norm) a.h holds
}

// Load reads the model folder and places it on backend. The caller keeps ownership of backend and
// calls Close on the model when done.
func Load(ctx context.Context, src Source, backend compute.Backend, opts Options) (*Model, error) {
	fsys, name, err := src.open()
	if err != nil {
		return nil, err
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	m := &Model{name: name, backend: backend}
	config, err := m.readMetadata(fsys, src.where(name))
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ckpt, err := openCheckpoint(src, fsys)
	if err != nil {
		return nil, err
	}
	defer ckpt.Close()
	m.identity = identity(config, ckpt, backend.Name())
	u := &uploader{ckpt: ckpt, backend: backend}
	m.w, err = loadWeights(u, m.cfg, func(done, total int) { progress("weights", done, total) })
	if err == nil {
		m.mtp, err = loadMTP(u, m.cfg)
	}
	m.uploaded = u.uploaded
	if err == nil {
		err = m.allocate(opts)
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (src Source) open() (fs.FS, string, error) {
	switch {
	case src.FS != nil:
		name := src.Name
		if name == "" {
			return nil, "", errors.New("engine: a model given as a file system needs a name")
		}
		return src.FS, name, nil
	case src.Dir != "":
		info, err := os.Stat(src.Dir)
		if err != nil {
			return nil, "", fmt.Errorf("engine: model folder: %w", err)
		}
		if !info.IsDir() {
			return nil, "", fmt.Errorf("engine: model path %s is not a folder; give the folder that holds config.json", src.Dir)
		}
		name := src.Name
		if name == "" {
			name = filepath.Base(filepath.Clean(src.Dir))
		}
		return os.DirFS(src.Dir), name, nil
	}
	return nil, "", errors.New("engine: no model folder given")
}

// where names the model in errors: its folder's full path, so that a user with several folders
// of the same name knows which one; name for a model given as a file system.
func (src Source) where(name string) string {
	if src.Dir != "" {
		return src.Dir
	}
	return name
}

func openCheckpoint(src Source, fsys fs.FS) (*safetensors.Checkpoint, error) {
	if src.Dir != "" {
		return safetensors.Open(src.Dir)
	}
	return safetensors.OpenFS(fsys)
}

// readConfig reads and checks the folder's config.json, and returns it with its bytes; where
// names the folder in errors.
func readConfig(fsys fs.FS, where string) (Config, []byte, error) {
	raw, err := fs.ReadFile(fsys, "config.json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Config{}, nil, fmt.Errorf("engine: %s has no config.json: give the folder of a Hugging Face model (config.json, safetensors weights, tokenizer.json)", where)
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
		m.maxRows = 256
	}
	m.slots = opts.Slots
	if m.slots <= 0 {
		m.slots = m.context
	}
	freqs := invFreq(c.Rope, c.HeadDim)
	var err error
	if m.invFreq, err = m.backend.Upload(compute.F32, []int{len(freqs)}, float32Bytes(freqs)); err != nil {
		return fmt.Errorf("engine: upload rotary table: %w", err)
	}
	m.attnScale = attentionScale(c.HeadDim)
	layers := c.Layers
	if m.mtp != nil {
		layers++ // the MTP layer keeps its own keys and values, after the backbone's
	}
	m.kvSpec = compute.KVSpec{Layers: layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Slots: m.slots}
	if m.kv, err = m.backend.NewKV(m.kvSpec); err != nil {
		return fmt.Errorf("engine: allocate KV pool of %d slots: %w", m.slots, err)
	}
	m.act, err = newActivations(m.backend, c, m.maxRows)
	return err
}

// Close frees everything the model placed on its backend, its block stores included.
func (m *Model) Close() {
	for s := range m.stores {
		s.Close()
	}
	if m.act != nil {
		m.act.free(m.backend)
		m.act = nil
	}
	if m.kv != nil {
		m.backend.FreeKV(m.kv)
		m.kv = nil
	}
	if m.invFreq != nil {
		m.backend.Free(m.invFreq)
		m.invFreq = nil
	}
	for _, t := range m.uploaded {
		m.backend.Free(t)
	}
	m.uploaded = nil
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

// Slots returns the size of the KV pool in tokens.
func (m *Model) Slots() int { return m.slots }

// Context returns the longest sequence the model runs.
func (m *Model) Context() int { return m.context }

// MoveKV copies n KV slots from src to dst in every layer; it implements scheduler.Model.
func (m *Model) MoveKV(dst, src, n int) error {
	if n < 0 || src < 0 || dst < 0 || src+n > m.slots || dst+n > m.slots {
		return fmt.Errorf("engine: move %d KV slots from %d to %d: outside the pool of %d", n, src, dst, m.slots)
	}
	m.backend.CopyKV(m.kv, dst, m.kv, src, n)
	return nil
}
