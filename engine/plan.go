package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"tfd/batch"
	"tfd/compute"
)

// The memory plan decides, before any weight is loaded, how the memory under the load limit is
// shared: weights, the forward's scratch, a margin, and the KV sessions. It is pure arithmetic
// over a model's config and tensor headers and the machine's memory, so `tfd plan`
// can show it without loading anything, and tests can run it on made-up machines.

// GiB is the unit of memory.load_limit_gb and memory.margin_gb: 2³⁰ bytes, the unit in which
// machines' memory is sold ("a 128 GB Mac" has 128 GiB).
const GiB = 1 << 30

// DefaultAutoCap bounds the sessions "auto" makes when PlanInput.AutoCap is 0: past it, rounds
// grow wider than a small machine drives well and the memory is better left to other programs.
const DefaultAutoCap = 16

// DefaultLimitShare is the share of the machine's memory the plan uses when no load limit is set.
const DefaultLimitShare = 0.70

// minContext is the smallest context the plan lowers an unset context to before it gives up.
const minContext = 256

// The prompt cache's default share (prompt_cache.gib = -1): a quarter of what is left after the
// weights, scratch and margin, at most 8 GiB (llama.cpp's server keeps 8 GiB of prompts by
// default), and never so much that one session of the model's window (or model.context) no
// longer fits beside it where it fit without the cache.
const (
	DefaultCacheShare = 0.25
	DefaultCacheMost  = 8 * GiB
)

// PlanInput is what the memory plan is computed from.
type PlanInput struct {
	// Model is the model's normalised config.json.
	Model Config
	// WeightBytes is the memory the weights take on the backend: their size as loaded
	// (WeightInfo.Bytes), since every backend keeps weight matrices in the dtype they load in.
	WeightBytes int64
	// Quantize is the quantization at load that WeightBytes counts, which the plan names.
	Quantize Quantization
	// DeviceMemory is the backend's memory in bytes (RAM for the CPU and Metal, device memory for
	// CUDA); 0 when unknown, and then LoadLimitGB must be set.
	DeviceMemory uint64
	// WorkingSet, when not 0, is what the GPU may hold at once (Metal's
	// recommendedMaxWorkingSetSize): the limit never goes above it.
	WorkingSet uint64
	// LoadLimitGB caps the plan, in GiB, itself capped at DeviceMemory; 0: DefaultLimitShare of it.
	LoadLimitGB float64
	// MarginGB is kept free under the limit, in GiB.
	MarginGB float64
	// Context is the longest sequence a session holds; 0: the model's window, lowered to what
	// memory allows. A larger value than the window is lowered to the window.
	Context int
	// Parallel is the number of context-sized sessions; 0: auto, as many as fit up to AutoCap, or
	// when fewer than two fit, one and smaller ones from what is left (see autoLayout).
	Parallel int
	// Grow is the tokens beyond its prompt a stream's session must hold: a layout whose largest
	// session cannot hold Grow tokens is refused, and auto makes no session smaller than Grow plus
	// 256 tokens.
	Grow int
	// Layout, if not empty, gives the session capacities in tokens and overrides Parallel.
	Layout batch.Layout
	// MaxRows is the most rows one forward takes; 0: DefaultMaxRows, as Load defaults.
	MaxRows int
	// LogitRows is the most of them that ask for logits (Options.LogitRows); 0: MaxRows.
	LogitRows int
	// AutoCap bounds the sessions auto makes; 0: DefaultAutoCap.
	AutoCap int
	// PromptCacheGiB is the prompt cache's memory, reserved before the sessions are sized: N GiB,
	// a negative number for the default share (DefaultCacheShare), 0 for none.
	PromptCacheGiB float64
	// StateDepth is, for a hybrid model (Qwen3-Next), how many of its newest positions' DeltaNet
	// states each session keeps (Options.StateDepth); 0: DefaultStateDepth.
	StateDepth int
	// KVCache is how keys and values are stored (Options.KVCache): compute.F32 (or 0) or F16.
	KVCache compute.DType
}

// Plan is a computed memory plan. All sizes are bytes.
type Plan struct {
	Limit   int64 // what the plan works within
	Weights int64
	// Quantize is the quantization at load the weights take (model.quantize); "" for none.
	Quantize Quantization
	Scratch  int64 // activations for MaxRows rows, logits for LogitRows
	Margin   int64
	Cache    int64 // the prompt cache's own memory
	KV       int64 // all sessions' keys and values
	States   int64 // all sessions' DeltaNet states (a hybrid model), besides their keys and values
	Left     int64 // Limit minus the rest; never negative

	// CacheFrom says how the prompt cache's size was chosen.
	CacheFrom string

	// LimitFrom says how the limit was chosen, e.g. "70% of 24.0 GiB".
	LimitFrom string
	// Memory is the machine's memory the plan read (RAM for the CPU and Metal, device memory for
	// CUDA), and WorkingSet what the GPU may hold at once where it shares RAM (Metal), or 0.
	Memory, WorkingSet int64
	// Context is the longest sequence a session holds, after any lowering.
	Context int
	// Layout lists the session capacities in tokens, largest first.
	Layout batch.Layout
	// Parallel is "auto", "layout" or the number asked for, as the plan read its input.
	Parallel string
	// MaxRows and LogitRows are the rows the scratch is sized for: of a forward, and of those
	// the rows that ask for logits.
	MaxRows, LogitRows int
	// KVCache is the dtype keys and values are stored in: F32 or F16.
	KVCache compute.DType
	// KVPerToken is the KV memory of one token of one session: every layer's, or, where the
	// sessions keep their sliding layers in rings, the other layers'.
	KVPerToken int64
	// RingPerSession is the memory of one session's rings for its sliding layers (two copies of
	// RingLength positions of each, window.go), or 0 when sessions keep every position.
	RingPerSession int64
	RingLength     int
	// CachePerToken is a cached token's memory in the prompt cache: every layer's keys and values.
	CachePerToken int64
	// CacheStatePerBlock is, for a hybrid model, the DeltaNet states a cached block carries beside
	// its tokens' keys and values (one position's); 0 for other models.
	CacheStatePerBlock int64
	// StatePerSession is a hybrid model's DeltaNet states of one session: StateDepth positions
	// of them and StateSnapshots block boundaries' (deltastate.go); 0 for other models.
	StatePerSession int64
	StateDepth      int
	StateSnapshots  int
	// Notes say what the plan decided that a person may not expect (a lowered context, the serial
	// host chosen by auto), one sentence each.
	Notes []string
}

// Slots returns the KV pool size the plan needs: the sum of its session capacities.
func (p Plan) Slots() int {
	n := 0
	for _, s := range p.Layout {
		n += s
	}
	return n
}

// CacheBlockBytes returns the memory of one prompt cache block of tokens tokens: their keys and
// values, and a hybrid model's DeltaNet states at its end.
func (p Plan) CacheBlockBytes(tokens int) int64 {
	return int64(tokens)*p.CachePerToken + p.CacheStatePerBlock
}

// Serial reports whether the plan has one session: one reply at a time.
func (p Plan) Serial() bool { return len(p.Layout) == 1 }

// MakePlan computes the memory plan for in, or explains why nothing fits: the error names the
// numbers and the settings that would make it fit.
func MakePlan(in PlanInput) (Plan, error) {
	in = in.withDefaults()
	if err := in.check(); err != nil {
		return Plan{}, err
	}
	p := Plan{MaxRows: in.MaxRows, LogitRows: in.LogitRows, CachePerToken: kvPerToken(in.Model, in.KVCache), CacheStatePerBlock: in.Model.StateBytes(1),
		Memory: int64(min(in.DeviceMemory, math.MaxInt64)), WorkingSet: int64(min(in.WorkingSet, math.MaxInt64))}
	var err error
	if p.Limit, p.LimitFrom, err = in.limit(); err != nil {
		return Plan{}, err
	}
	p.Weights, p.Quantize, p.KVCache = in.WeightBytes, in.Quantize, in.KVCache
	p.Scratch = ScratchBytes(in.Model, in.MaxRows, in.LogitRows)
	p.Margin = int64(in.MarginGB * GiB)
	avail := p.Limit - p.Weights - p.Scratch - p.Margin
	if avail <= 0 {
		return Plan{}, fmt.Errorf("memory: the weights (%s), scratch for %d rows (%s) and margin (%s) need %s, more than the %s limit: raise memory.load_limit_gb, lower memory.margin_gb, or serve a smaller model",
			FormatBytes(p.Weights), in.MaxRows, FormatBytes(p.Scratch), FormatBytes(p.Margin),
			FormatBytes(p.Weights+p.Scratch+p.Margin), FormatBytes(p.Limit))
	}
	p.Context = in.Model.MaxPositions
	if in.Context > 0 && in.Context < p.Context {
		p.Context = in.Context
	}
	p.sessionCost(in)
	if err := p.promptCache(in, avail); err != nil {
		return Plan{}, err
	}
	avail -= p.Cache
	// A hybrid model's sessions each hold their states besides their keys and values: reserved
	// for as many sessions as the layout may have, and what the sessions made do not use is left.
	reserved := int64(0)
	if in.Model.Next.Enabled {
		p.StateDepth = in.StateDepth
		p.StateSnapshots = snapshots(in.MaxRows)
		p.StatePerSession = in.Model.StateBytes(p.StateDepth + p.StateSnapshots)
		reserved = int64(in.mostSessions()) * p.StatePerSession
		if reserved >= avail {
			return Plan{}, fmt.Errorf("memory: the DeltaNet states of %d sessions (%s each, %d positions deep) need %s, and %s is left under the %s limit: use fewer sessions, shallower drafts (drafts.mtp_max, drafts.ngram_max), or raise memory.load_limit_gb",
				in.mostSessions(), FormatBytes(p.StatePerSession), p.StateDepth, FormatBytes(reserved), FormatBytes(avail), FormatBytes(p.Limit))
		}
	}
	if err := p.sessions(in, avail-reserved); err != nil {
		return Plan{}, err
	}
	p.KV = p.layoutBytes(len(p.Layout), p.Slots())
	p.States = int64(len(p.Layout)) * p.StatePerSession
	p.Left = avail - p.KV - p.States
	if p.RingLength > 0 {
		_, sliding := in.Model.windowed()
		p.Notes = append(p.Notes, fmt.Sprintf("sliding window: the %d sliding layers of a session keep their last %d positions (the window and a forward's rows) in rings, %s a session; a session of %d tokens takes %s, against %s keeping every position",
			sliding, p.RingLength, FormatBytes(p.RingPerSession), p.Context, FormatBytes(p.layoutBytes(1, p.Context)), FormatBytes(int64(p.Context)*p.CachePerToken)))
	}
	if moe := in.Model.MoE; moe.Experts > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("mixture of experts: the weights hold all %d experts of each of the %d sparse layers (%d run for each token), so all are resident",
			moe.Experts, moe.SparseLayers(in.Model.Layers), moe.PerToken))
	}
	return p, nil
}

// mostSessions is how many sessions the layout may have: the layout's, the parallel count, or the
// most auto makes.
func (in PlanInput) mostSessions() int {
	switch {
	case len(in.Layout) > 0:
		return len(in.Layout)
	case in.Parallel > 0:
		return in.Parallel
	}
	return in.AutoCap
}

// promptCache sets p.Cache and p.CacheFrom from in, within avail bytes.
func (p *Plan) promptCache(in PlanInput, avail int64) error {
	switch gib := in.PromptCacheGiB; {
	case gib == 0:
		p.CacheFrom = "prompt_cache.gib = 0: off"
	case gib > 0:
		p.Cache = int64(gib * GiB)
		p.CacheFrom = fmt.Sprintf("prompt_cache.gib = %g", gib)
		if p.Cache > avail {
			return fmt.Errorf("memory: prompt_cache.gib = %g needs %s, and %s is left under the %s limit after the weights, scratch and margin: lower prompt_cache.gib (0 turns the cache off, -1 takes a default share) or raise memory.load_limit_gb",
				gib, FormatBytes(p.Cache), FormatBytes(avail), FormatBytes(p.Limit))
		}
	default:
		p.Cache = min(int64(float64(avail)*DefaultCacheShare), DefaultCacheMost)
		if room := avail - p.layoutBytes(1, p.Context); room > 0 {
			p.Cache = min(p.Cache, room) // else the context is lowered anyway
		}
		p.CacheFrom = fmt.Sprintf("default: %.0f%% of what the weights, scratch and margin leave, at most %s, leaving room for one session of the context", DefaultCacheShare*100, FormatBytes(DefaultCacheMost))
	}
	return nil
}

func (in PlanInput) withDefaults() PlanInput {
	if in.MaxRows <= 0 {
		in.MaxRows = DefaultMaxRows
	}
	if in.LogitRows <= 0 || in.LogitRows > in.MaxRows {
		in.LogitRows = in.MaxRows
	}
	if in.AutoCap <= 0 {
		in.AutoCap = DefaultAutoCap
	}
	if in.StateDepth <= 0 {
		in.StateDepth = DefaultStateDepth
	}
	if in.KVCache == 0 {
		in.KVCache = compute.F32
	}
	return in
}

func (in PlanInput) check() error {
	switch {
	case in.Model.Layers <= 0 || in.Model.KVHeads <= 0 || in.Model.HeadDim <= 0 || in.Model.MaxPositions <= 0:
		return errors.New("memory: the model's config has no layers, KV heads, head size or window to plan for")
	case in.WeightBytes < 0 || in.LoadLimitGB < 0 || in.MarginGB < 0 || in.Context < 0 || in.Parallel < 0 || in.Grow < 0:
		return fmt.Errorf("memory: negative plan input %+v", in)
	}
	if err := compute.CheckKVDType(in.KVCache); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	for _, s := range in.Layout {
		if s <= 0 {
			return fmt.Errorf("memory: session capacity %d in the layout: want positive numbers of tokens", s)
		}
	}
	return nil
}

// limit returns the bytes the plan works within and how they were chosen: limitOfMemory's, never
// above the GPU's working set.
func (in PlanInput) limit() (int64, string, error) {
	limit, from, err := in.limitOfMemory()
	if set := int64(min(in.WorkingSet, math.MaxInt64)); err == nil && set > 0 && limit > set {
		return set, from + fmt.Sprintf(", capped at the GPU's recommended working set of %s", FormatBytes(set)), nil
	}
	return limit, from, err
}

// limitOfMemory returns memory.load_limit_gb, capped at the machine's memory, or the default share
// of that memory.
func (in PlanInput) limitOfMemory() (int64, string, error) {
	device := int64(min(in.DeviceMemory, math.MaxInt64))
	if in.LoadLimitGB > 0 {
		asked := int64(in.LoadLimitGB * GiB)
		if device > 0 && asked > device {
			return device, fmt.Sprintf("memory.load_limit_gb = %g, capped at the %s of memory", in.LoadLimitGB, FormatBytes(device)), nil
		}
		return asked, fmt.Sprintf("memory.load_limit_gb = %g", in.LoadLimitGB), nil
	}
	if device == 0 {
		return 0, "", errors.New("memory: this machine's memory size is unknown: set memory.load_limit_gb")
	}
	return int64(float64(device) * DefaultLimitShare), fmt.Sprintf("%.0f%% of %s", DefaultLimitShare*100, FormatBytes(device)), nil
}

// sessions fills p.Layout, p.Parallel and p.Notes from in, within avail bytes, and lowers
// p.Context where the user left it to the plan and it does not fit.
func (p *Plan) sessions(in PlanInput, avail int64) error {
	fits := func(sessions, tokens int) bool { return p.layoutBytes(sessions, tokens) <= avail }
	switch {
	case len(in.Layout) > 0:
		return p.explicitLayout(in, avail, fits)
	case in.Parallel > 0:
		p.Parallel = fmt.Sprint(in.Parallel)
		if !fits(in.Parallel, in.Parallel*p.Context) && in.Context == 0 {
			p.lowerContext(in, in.Parallel, avail)
		}
		if !fits(in.Parallel, in.Parallel*p.Context) {
			return p.refuse(in.Parallel, p.Context, avail, "use fewer sessions, a smaller context")
		}
		p.Layout = slices.Repeat([]int{p.Context}, in.Parallel)
	default:
		p.Parallel = "auto"
		p.autoLayout(in, avail, fits)
		if len(p.Layout) == 0 {
			return p.refuse(1, p.Context, avail, "use a smaller context")
		}
	}
	return nil
}

// autoLayout makes as many context-sized sessions as fit, up to in.AutoCap. When fewer than two
// fit, it keeps one session as long as the context, so that any reply can run to the end of the
// context, and sizes the others from what is left (smallerSessions); with none beside it, that
// one is the serial host. When even one does not fit and the context was left to the plan, the
// context is lowered first.
func (p *Plan) autoLayout(in PlanInput, avail int64, fits func(sessions, tokens int) bool) {
	n := int(min(avail/p.layoutBytes(1, p.Context), int64(in.AutoCap)))
	switch {
	case n >= 2:
		p.Layout = slices.Repeat([]int{p.Context}, n)
		if n == in.AutoCap {
			p.Notes = append(p.Notes, fmt.Sprintf("auto: %d sessions, the most auto makes; set sessions.parallel or sessions.layout for more", n))
		}
		return
	case n == 0 && in.Context == 0:
		p.lowerContext(in, 1, avail)
		if !fits(1, p.Context) {
			return
		}
	case n == 0:
		return
	}
	// A session's rings count as the tokens of KV they take.
	ringTokens := int((p.RingPerSession + p.KVPerToken - 1) / p.KVPerToken)
	smaller := smallerSessions(p.Context, (avail-p.layoutBytes(1, p.Context))/p.KVPerToken, in.Grow, in.AutoCap-1, ringTokens)
	p.Layout = append([]int{p.Context}, smaller...)
	if len(smaller) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("auto: fewer than two sessions of %d tokens fit, so one holds the whole context and smaller ones (%s) share what is left; a reply that outgrows its session moves to a larger free one, up to the whole-context one; %s for more whole-context sessions", p.Context, batch.Layout(smaller), p.waysToMore()))
		return
	}
	p.Notes = append(p.Notes, fmt.Sprintf("auto: fewer than two sessions of %d tokens fit, so tfd serves one reply at a time (the serial host); %s for more", p.Context, p.waysToMore()))
}

// waysToMore lists the settings that let more sessions fit: a smaller context, a higher load
// limit and, while keys and values are F32, F16 ones.
func (p *Plan) waysToMore() string {
	if p.KVCache == compute.F16 {
		return "lower model.context or raise memory.load_limit_gb"
	}
	return `lower model.context, raise memory.load_limit_gb, or set sessions.kv_cache = "f16" (half the memory a token)`
}

// smallerSessions sizes the sessions auto puts beside the one of the whole context, within left
// tokens of KV and at most most of them: halving from half the context, it takes as many sessions
// of each size as fit in what is still left, and stops before a size smaller than grow (2048 when
// 0) plus minContext, so the smallest still holds a short prompt and the growth a new reply is
// promised. What is left is then under the context, so each size fits at most once: a ladder of
// half, a quarter, an eighth … of the context, for replies of every length to move up. Each
// session takes extra tokens' worth beside its own (its sliding layers' rings).
func smallerSessions(context int, left int64, grow, most, extra int) []int {
	if grow <= 0 {
		grow = 2048
	}
	var sizes []int
	for size := context / 2; size >= grow+minContext && len(sizes) < most; size /= 2 {
		for int64(size+extra) <= left && len(sizes) < most {
			sizes = append(sizes, size)
			left -= int64(size + extra)
		}
	}
	return sizes
}

// lowerContext lowers p.Context, which the user left to the plan, until n sessions of it fit in
// avail: to a multiple of 1024 tokens where it can, and never below minContext. A context lowered
// so far that rings no longer save memory keeps every position, and may then not fit: the caller
// checks.
func (p *Plan) lowerContext(in PlanInput, n int, avail int64) {
	per := (avail/int64(n) - p.RingPerSession) / p.KVPerToken
	lowered := int(min(per, int64(p.Context)))
	if lowered >= 1024 {
		lowered -= lowered % 1024
	}
	if lowered < minContext {
		return // the caller refuses with the window's numbers
	}
	p.Notes = append(p.Notes, fmt.Sprintf("context lowered from the model's window of %d to %d tokens so that %d session(s) fit", p.Context, lowered, n))
	p.Context = lowered
	p.sessionCost(in)
}

// sessionCost sets what a session costs at p.Context: KVPerToken, and its rings where the
// sessions keep their sliding layers in rings (as Load decides, from the context and MaxRows).
func (p *Plan) sessionCost(in PlanInput) {
	p.KVPerToken, p.RingPerSession, p.RingLength = p.CachePerToken, 0, 0
	if r := in.Model.RingLength(p.Context, in.MaxRows); r > 0 {
		_, sliding := in.Model.windowed()
		full := in.Model
		full.Layers -= sliding
		p.KVPerToken = kvPerToken(full, in.KVCache)
		p.RingPerSession, p.RingLength = in.Model.RingBytes(p.Context, in.MaxRows, in.KVCache), r
	}
}

// layoutBytes returns the KV memory of sessions sessions of tokens tokens in all.
func (p *Plan) layoutBytes(sessions, tokens int) int64 {
	return int64(tokens)*p.KVPerToken + int64(sessions)*p.RingPerSession
}

// explicitLayout checks a layout the user gave.
func (p *Plan) explicitLayout(in PlanInput, avail int64, fits func(sessions, tokens int) bool) error {
	p.Parallel = "layout"
	p.Layout = slices.Clone(in.Layout)
	slices.SortFunc(p.Layout, func(a, b int) int { return b - a })
	if in.Parallel > 0 && in.Parallel != len(p.Layout) {
		p.Notes = append(p.Notes, fmt.Sprintf("sessions.layout gives %d sessions; it overrides sessions.parallel = %d", len(p.Layout), in.Parallel))
	}
	if p.Layout[0] > p.Context {
		return fmt.Errorf("memory: sessions.layout has a session of %d tokens, more than the context of %d: use sessions no larger than the context, or raise model.context", p.Layout[0], p.Context)
	}
	if in.Grow > 0 && p.Layout[0] <= in.Grow {
		return fmt.Errorf("memory: the largest session in sessions.layout holds %d tokens, not more than sessions.grow = %d: use larger sessions or a smaller sessions.grow", p.Layout[0], in.Grow)
	}
	if !fits(len(p.Layout), p.Slots()) {
		need := p.layoutBytes(len(p.Layout), p.Slots())
		return fmt.Errorf("memory: sessions.layout %s needs %s, %s is left under the %s limit: use fewer or smaller sessions, or raise memory.load_limit_gb",
			p.Layout.String(), FormatBytes(need), FormatBytes(avail), FormatBytes(p.Limit))
	}
	return nil
}

// refuse explains that n sessions of tokens each do not fit in avail.
func (p *Plan) refuse(n, tokens int, avail int64, ways string) error {
	need := p.layoutBytes(n, n*tokens)
	what := fmt.Sprintf("%d sessions of %d tokens need", n, tokens)
	if n == 1 {
		what = fmt.Sprintf("1 session of %d tokens needs", tokens)
	}
	if p.KVCache != compute.F16 {
		ways += `, F16 keys and values (sessions.kv_cache = "f16": half the memory a token)`
	}
	return fmt.Errorf("memory: %s %s, %s is left under the %s limit: %s, or raise memory.load_limit_gb",
		what, FormatBytes(need), FormatBytes(avail), FormatBytes(p.Limit), ways)
}

// kvPerToken is the KV memory one token takes in one session: keys and values in every layer
// that keeps them (a hybrid model's attention layers), the MTP head's included, stored as kvCache.
func kvPerToken(c Config, kvCache compute.DType) int64 {
	return compute.KVSpec{Layers: c.KVLayers() + min(c.MTPLayers, 1), KVHeads: c.KVHeads, HeadDim: c.HeadDim, Slots: 1, DType: kvCache}.Bytes()
}

// ScratchBytes estimates the forward's scratch for maxRows rows of which logitRows ask for logits:
// the F32 activations Load allocates (hidden states, q, k, v, attention output, the MLP's gate
// and up, row metadata), the logits and the host's copy of them; and for a mixture of experts, the router's
// scores, each row's experts and weights, the pairs grouped by expert, each pair's gate, up and
// output, and the pairs' inputs and outputs the cpu backend gathers for an expert's matrix.
func ScratchBytes(c Config, maxRows, logitRows int) int64 {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	perRow := 4 + 5*c.Hidden + 2*q + 2*kv + 2*c.Intermediate
	fixed := 0
	if moe := c.MoE; moe.Experts > 0 {
		k := moe.PerToken
		perRow += moe.Experts + 3*k + k*(2*moe.Intermediate+c.Hidden) + k*2*c.Hidden
		fixed = moe.Experts + 1
	}
	if n := c.Next; n.Enabled {
		// a DeltaNet layer's projections, convolution, recurrence and b/a, its step list, the
		// attention's gate, and the shared expert's gate, up, output and score
		perRow += 2*n.ConvChannels() + 2*n.VHeads*n.VDim + 2*n.VHeads + 3 + q + 2*n.SharedIntermediate + c.Hidden + 1
	}
	return (int64(maxRows)*int64(perRow) + int64(logitRows)*2*int64(c.Vocab) + int64(fixed)) * 4
}
