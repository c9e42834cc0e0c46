package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/engine/safetensors"
	"tfd/models"
)

// tinyModel has 4 KiB of F32 KV a token (2 × 4 layers × 2 heads × 64) and a window of 8192
// tokens, so one full session is 32 MiB; its scratch for 16 rows is 324,864 bytes.
var tinyModel = Config{Hidden: 256, Intermediate: 512, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 64,
	Vocab: 1000, MaxPositions: 8192}

const MiB = 1 << 20

// tinyInput is a 1 GiB machine (limit 70%: 716.8 MiB) with 100 MiB of weights and a 256 MiB
// margin: 378,001,356 bytes (360.5 MiB) are left for sessions, 11.3 full sessions.
func tinyInput(edit func(*PlanInput)) PlanInput {
	in := PlanInput{Model: tinyModel, WeightBytes: 100 * MiB, DeviceMemory: GiB, MarginGB: 0.25, MaxRows: 16, Grow: 2048}
	if edit != nil {
		edit(&in)
	}
	return in
}

func TestMakePlan(t *testing.T) {
	tests := []struct {
		name    string
		in      PlanInput
		layout  string // the plan's layout; empty when an error is expected
		context int
		left    int64  // checked when not 0
		note    string // a substring of one note
		err     string // a substring of the error
	}{
		{name: "auto fits eleven", in: tinyInput(nil), layout: "8192x11", context: 8192, left: 378001356 - 11*32*MiB},
		{name: "F16 keys and values fit twice as many", in: tinyInput(func(in *PlanInput) { in.KVCache = compute.F16; in.AutoCap = 32 }),
			layout: "8192x22", context: 8192, left: 378001356 - 22*16*MiB},
		{name: "auto is capped", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 64 * GiB }),
			layout: "8192x16", context: 8192, note: "the most auto makes"},
		{name: "auto falls back to the serial host", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 560 * MiB }),
			layout: "8192", context: 8192, note: "one reply at a time (the serial host)"},
		{name: "the serial host's note names F16 keys and values", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 560 * MiB }),
			layout: "8192", context: 8192, note: `raise memory.load_limit_gb, or set sessions.kv_cache = "f16" (half the memory a token) for more`},
		// 600 MiB: one whole-context session and 7936 tokens left, 4096 of which make a session of
		// half the context; a quarter (2048) is under sessions.grow + 256.
		{name: "auto keeps a whole-context session beside a smaller one", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 600 * MiB }),
			layout: "8192,4096", context: 8192, note: "one holds the whole context and smaller ones (4096) share what is left"},
		{name: "auto halves down to grow plus 256", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 600 * MiB; in.Grow = 512 }),
			layout: "8192,4096,2048,1024", context: 8192, note: "smaller ones (4096,2048,1024)"},
		{name: "auto's smaller sessions are capped", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 600 * MiB; in.Grow = 512; in.AutoCap = 3 }),
			layout: "8192,4096,2048", context: 8192},
		{name: "auto lowers an unset context", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 180 * MiB; in.MarginGB = 0 }),
			layout: "6144", context: 6144, note: "context lowered from the model's window of 8192 to 6144"},
		{name: "auto keeps a set context and refuses", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 180 * MiB; in.MarginGB = 0; in.Context = 8192 }),
			err: "memory: 1 session of 8192 tokens needs 32.0 MiB, 25.7 MiB is left under the 126.0 MiB limit: use a smaller context, F16 keys and values (sessions.kv_cache = \"f16\": half the memory a token), or raise memory.load_limit_gb"},
		{name: "parallel fits", in: tinyInput(func(in *PlanInput) { in.Parallel = 4; in.Context = 4096 }), layout: "4096x4", context: 4096},
		{name: "parallel one is serial", in: tinyInput(func(in *PlanInput) { in.Parallel = 1 }), layout: "8192", context: 8192},
		{name: "parallel over memory is refused", in: tinyInput(func(in *PlanInput) { in.Parallel = 12; in.Context = 8192 }),
			err: "memory: 12 sessions of 8192 tokens need 384.0 MiB, 360.5 MiB is left under the 716.8 MiB limit: use fewer sessions, a smaller context, F16 keys and values (sessions.kv_cache = \"f16\": half the memory a token), or raise memory.load_limit_gb"},
		{name: "parallel with an unset context lowers it", in: tinyInput(func(in *PlanInput) { in.Parallel = 12 }),
			layout: "7168x12", context: 7168, note: "so that 12 session(s) fit"},
		{name: "a context past the window is the window", in: tinyInput(func(in *PlanInput) { in.Parallel = 2; in.Context = 100000 }), layout: "8192x2", context: 8192},
		{name: "layout fits, largest first", in: tinyInput(func(in *PlanInput) { in.Layout = []int{4096, 4096, 8192, 8192, 8192, 8192} }),
			layout: "8192x4,4096x2", context: 8192},
		{name: "layout overrides parallel", in: tinyInput(func(in *PlanInput) { in.Layout = []int{8192, 4096}; in.Parallel = 3 }),
			layout: "8192,4096", context: 8192, note: "overrides sessions.parallel = 3"},
		{name: "layout over memory is refused", in: tinyInput(func(in *PlanInput) { in.Layout = slices.Repeat([]int{8192}, 12) }),
			err: "memory: sessions.layout 8192x12 needs 384.0 MiB, 360.5 MiB is left under the 716.8 MiB limit"},
		{name: "layout past the context is refused", in: tinyInput(func(in *PlanInput) { in.Layout = []int{16384}; in.Context = 8192 }),
			err: "a session of 16384 tokens, more than the context of 8192"},
		{name: "layout not above grow is refused", in: tinyInput(func(in *PlanInput) { in.Layout = []int{1024} }),
			err: "holds 1024 tokens, not more than sessions.grow = 2048"},
		{name: "load limit is used", in: tinyInput(func(in *PlanInput) { in.LoadLimitGB = 0.5 }), layout: "8192x4", context: 8192},
		{name: "load limit is capped at memory", in: tinyInput(func(in *PlanInput) { in.LoadLimitGB = 2; in.MarginGB = 0.55 }),
			layout: "8192x11", context: 8192},
		{name: "unknown memory needs a limit", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 0 }), err: "set memory.load_limit_gb"},
		{name: "unknown memory with a limit", in: tinyInput(func(in *PlanInput) { in.DeviceMemory = 0; in.LoadLimitGB = 1 }), layout: "8192x16", context: 8192},
		{name: "weights over the limit", in: tinyInput(func(in *PlanInput) { in.WeightBytes = GiB }),
			err: "more than the 716.8 MiB limit: raise memory.load_limit_gb, lower memory.margin_gb, or serve a smaller model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := MakePlan(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.LayoutString(); got != tc.layout || p.Context != tc.context {
				t.Errorf("layout %s of context %d, want %s of %d\n%s", got, p.Context, tc.layout, tc.context, p)
			}
			if tc.left != 0 && p.Left != tc.left {
				t.Errorf("left %d, want %d", p.Left, tc.left)
			}
			if tc.note != "" && !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
				t.Errorf("notes %q, want one containing %q", p.Notes, tc.note)
			}
			checkPlanSums(t, p)
		})
	}
}

// checkPlanSums checks the properties every plan has: its parts add up to the limit and the
// sessions fit.
func checkPlanSums(t *testing.T, p Plan) {
	t.Helper()
	if p.Weights+p.Scratch+p.Margin+p.KV+p.Left != p.Limit || p.Left < 0 {
		t.Errorf("parts do not add up to the limit: %+v", p)
	}
	if p.KV != int64(p.Slots())*p.KVPerToken {
		t.Errorf("KV %d for %d slots of %d bytes", p.KV, p.Slots(), p.KVPerToken)
	}
	for _, s := range p.Layout {
		if s > p.Context {
			t.Errorf("session of %d tokens in a context of %d", s, p.Context)
		}
	}
}

func TestPlanFigures(t *testing.T) {
	p, err := MakePlan(tinyInput(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.KVPerToken != 4096 || p.Scratch != 324864 || p.Limit != 751619276 || p.Margin != GiB/4 {
		t.Errorf("per token %d, scratch %d, limit %d, margin %d", p.KVPerToken, p.Scratch, p.Limit, p.Margin)
	}
	text := p.String()
	for _, want := range []string{"memory plan", "70% of 1.0 GiB", "8192x11 (shared host; parallel auto), 4.0 KiB a token", "prompt cache: prompt_cache.gib = 0: off"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 30 * GiB: "30.0 GiB", 4402341478: "4.1 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestInspectBundled checks the header-only reader against the full safetensors reader.
func TestInspectBundled(t *testing.T) {
	src := Source{FS: models.FS(), Name: models.Name}
	cfg, info, err := Inspect(src, NoQuantization)
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := safetensors.OpenFS(models.FS())
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	var params, bytes int64
	for _, name := range ckpt.Names() {
		tn, _ := ckpt.Tensor(name)
		params += int64(tn.Elements())
		bytes += int64(len(tn.Data))
	}
	if info.Params != params || info.FileBytes != bytes || !slices.Equal(info.DTypes, []string{"BF16"}) {
		t.Errorf("Inspect: %+v; the checkpoint has %d parameters in %d bytes", info, params, bytes)
	}
	if cfg.Layers != 8 {
		t.Errorf("config %+v", cfg)
	}
}

// TestInspectQuantized: quantized at load, every weight matrix of the bundled model counts its
// Q8_0 or Q4_0 bytes (the embedding table, which is the head, Q8_0 under q4 too), the norms their
// BF16 bytes; the plan names the quantization.
func TestInspectQuantized(t *testing.T) {
	src := Source{FS: models.FS(), Name: models.Name}
	ckpt, err := safetensors.OpenFS(models.FS())
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	for _, q := range []Quantization{QuantizeQ8, QuantizeQ4} {
		cfg, info, err := Inspect(src, q)
		if err != nil {
			t.Fatal(err)
		}
		var want int64
		for _, name := range ckpt.Names() {
			tn, _ := ckpt.Tensor(name)
			switch {
			case len(tn.Shape) == 1:
				want += int64(len(tn.Data))
			case q == QuantizeQ8 || name == "model.embed_tokens.weight":
				want += int64(tn.Elements() / 32 * 34)
			default:
				want += int64(tn.Elements() / 32 * 18)
			}
		}
		if info.Bytes != want || info.Bytes >= info.FileBytes {
			t.Errorf("%s: %d bytes as loaded (%d in the files), want %d", q, info.Bytes, info.FileBytes, want)
		}
		p, err := MakePlan(PlanInput{Model: cfg, WeightBytes: info.Bytes, Quantize: q, DeviceMemory: 16 * GiB})
		if err != nil {
			t.Fatal(err)
		}
		if p.Weights != info.Bytes || !strings.Contains(p.String(), "quantized at load (model.quantize = "+string(q)+")") {
			t.Errorf("%s: plan\n%s", q, p)
		}
	}
}

// TestInspectNamesTheFolder: a folder without config.json is named by its whole path, as
// `tfd plan` shows it; several folders may share the last name ("Qwen3-8B").
func TestInspectNamesTheFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "models", "Qwen3-8B")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := Inspect(Source{Dir: dir}, NoQuantization)
	if err == nil || !strings.Contains(err.Error(), dir+" has no config.json") {
		t.Errorf("Inspect = %v, want an error naming %s", err, dir)
	}
}

// TestPlanCappedAtWorkingSet: on a Mac the limit never passes the GPU's recommended working set,
// and the plan says so.
func TestPlanCappedAtWorkingSet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limitGB    float64
		workingSet uint64
		want       int64
		says       string
	}{
		{"70% of RAM under the working set", 0, 40 * GiB, -1, "70% of 48.0 GiB"},
		{"70% of RAM over the working set", 0, 30 * GiB, 30 * GiB, "capped at the GPU's recommended working set of 30.0 GiB"},
		{"load limit over the working set", 40, 30 * GiB, 30 * GiB, "memory.load_limit_gb = 40, capped at the GPU's recommended working set"},
		{"no working set known", 0, 0, -1, "70% of 48.0 GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tinyInput(func(in *PlanInput) {
				in.DeviceMemory, in.WorkingSet, in.LoadLimitGB = 48*GiB, tc.workingSet, tc.limitGB
			})
			p, err := MakePlan(in)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want < 0 { // the default share of RAM
				ram := float64(48 * GiB)
				tc.want = int64(ram * DefaultLimitShare)
			}
			if p.Limit != tc.want || !strings.Contains(p.LimitFrom, tc.says) {
				t.Errorf("limit %s (%s), want %s saying %q", FormatBytes(p.Limit), p.LimitFrom, FormatBytes(tc.want), tc.says)
			}
			if shows := strings.Contains(p.String(), "recommended working set (recommendedMaxWorkingSetSize)"); shows != (tc.workingSet > 0) {
				t.Errorf("the plan shows the working set: %v, want %v\n%s", shows, tc.workingSet > 0, p)
			}
		})
	}
}

// TestPlanReservesThePromptCacheFirst: an explicit cache comes off the top and the sessions are
// sized from the rest; the default share is a quarter, capped so one context still fits; a cache
// that does not fit is refused with the numbers and the settings to change.
func TestPlanReservesThePromptCacheFirst(t *testing.T) {
	c := Config{Layers: 4, KVHeads: 1, HeadDim: 128, MaxPositions: 8192} // 4 KiB a token
	in := PlanInput{Model: c, DeviceMemory: 4 * GiB, LoadLimitGB: 3, Parallel: 2}
	off, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	in.PromptCacheGiB = 1
	on, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if on.Cache != GiB || on.KV != off.KV || on.Left != off.Left-GiB {
		t.Errorf("1 GiB cache: cache %d, sessions %d (%d without), left %d (%d without)", on.Cache, on.KV, off.KV, on.Left, off.Left)
	}
	if !strings.Contains(on.String(), "prompt_cache.gib = 1") {
		t.Errorf("the plan does not say where the cache's size came from:\n%s", on)
	}
	in.PromptCacheGiB = -1
	def, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	avail := def.Limit - def.Weights - def.Scratch - def.Margin
	if want := avail / 4; def.Cache != want {
		t.Errorf("default cache %d, want a quarter of %d", def.Cache, avail)
	}
	in.PromptCacheGiB = 5
	_, err = MakePlan(in)
	if err == nil || !strings.Contains(err.Error(), "prompt_cache.gib = 5") || !strings.Contains(err.Error(), "memory.load_limit_gb") {
		t.Errorf("an oversized cache gave %v, want a refusal naming prompt_cache.gib and the limit", err)
	}
	// A default share that would leave no room for one session of the window is cut to the room.
	in = PlanInput{Model: c, LoadLimitGB: 0.1, PromptCacheGiB: -1}
	small, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if small.Layout[0] != 8192 || small.Cache > small.Limit-small.Weights-small.Scratch-small.Margin-8192*4096 {
		t.Errorf("small machine: layout %v, cache %d: the cache squeezed out the one whole-window session", small.Layout, small.Cache)
	}
}
