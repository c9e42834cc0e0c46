package cuda

import (
	"slices"
	"strings"
	"testing"

	"tfd/kernels"
)

// recorded returns the launches b has recorded so far, by kernel, and whether each would be
// launched dependent. The worker is never started: nothing runs.
func recorded(b *backend) (names []string, dependent []bool) {
	for _, c := range b.w.cur.cmds[:b.w.cur.n] {
		names = append(names, c.k.name)
		dependent = append(dependent, c.dependent)
	}
	return names, dependent
}

// TestHeavyAfterHeavyIsNotDependent records launches, as a forward would, on a backend with no
// device and reads back which the worker would launch dependent: all of a forward of up to
// pdlRows rows, but with serialHeavy a heavy kernel straight after a heavy one; none past pdlRows.
func TestHeavyAfterHeavyIsNotDependent(t *testing.T) {
	mm := &kernel{name: "matmul_mma_packed_bf16_1", threads: 128, params: 1, heavy: true}
	attn := &kernel{name: "attention_split_f32", threads: 128, params: 1, heavy: true}
	norm := &kernel{name: "rmsnorm_row", threads: 256, params: 1}
	seq := []*kernel{mm, mm, norm, mm, norm, norm, attn, mm, mm, norm}
	every := slices.Repeat([]bool{true}, len(seq))
	for _, tc := range []struct {
		rows   int
		serial bool
		want   []bool
	}{
		{1, true, []bool{true, false, true, true, true, true, true, false, false, true}},
		{pdlRows, true, []bool{true, false, true, true, true, true, true, false, false, true}},
		{pdlRows + 1, true, make([]bool, len(seq))},
		{1, false, every},
		{pdlRows + 1, false, make([]bool, len(seq))},
	} {
		b := &backend{w: newWorker(), pdlRows: pdlRows, forwardRows: tc.rows, serialHeavy: tc.serial}
		for i, k := range seq {
			b.launch(k, 1, 1, uint64(i))
		}
		if _, got := recorded(b); !slices.Equal(got, tc.want) {
			t.Errorf("%d rows, serial %v: launched dependent %v, want %v", tc.rows, tc.serial, got, tc.want)
		}
	}
}

// TestLeaveOutSkipsLaunches checks the benchmarks' hook: the kernels it names are not recorded,
// and a heavy kernel that comes to follow another heavy one because of it is then launched not
// dependent under serialHeavy, as it would be if the two were neighbours.
func TestLeaveOutSkipsLaunches(t *testing.T) {
	mm := &kernel{name: "matmul_mma_packed_bf16_1", threads: 128, params: 1, heavy: true}
	silu := &kernel{name: "silu_mul", threads: 256, params: 1}
	norm := &kernel{name: "rmsnorm_row", threads: 256, params: 1}
	b := &backend{w: newWorker(), pdlRows: pdlRows, forwardRows: 1, serialHeavy: true, leaveOut: []string{"silu_"}}
	for i, k := range []*kernel{norm, mm, silu, mm, norm} {
		b.launch(k, 1, 1, uint64(i))
	}
	names, dependent := recorded(b)
	if want := []string{"rmsnorm_row", "matmul_mma_packed_bf16_1", "matmul_mma_packed_bf16_1", "rmsnorm_row"}; !slices.Equal(names, want) {
		t.Errorf("recorded %v, want %v", names, want)
	}
	if want := []bool{true, true, false, true}; !slices.Equal(dependent, want) {
		t.Errorf("launched dependent %v, want %v", dependent, want)
	}
}

// TestHeavyNamesTheMatMulsAndAttention checks heavyPrefixes against tfd/kernels' own names: every
// family still has kernels (a renamed one would silently leave the rule), and the kernels of a
// step that must stay light, attention_combine among them, are real and not heavy.
func TestHeavyNamesTheMatMulsAndAttention(t *testing.T) {
	names := map[string]bool{}
	families := map[string]bool{}
	for _, k := range kernels.All() {
		names[k.Name] = true
		for _, f := range heavyPrefixes {
			families[f] = families[f] || strings.HasPrefix(k.Name, f)
		}
	}
	for _, f := range heavyPrefixes {
		if !families[f] {
			t.Errorf("tfd/kernels has no %s… kernel", f)
		}
	}
	for _, light := range []string{"attention_combine", "rmsnorm_row", "qk_rope_write_128_f32", "silu_mul", "mma_split_wg", "mma_sum_quarters", "embed_packed_bf16", "argmax_rows"} {
		if !names[light] {
			t.Errorf("tfd/kernels has no kernel %s", light)
		}
		if heavy(light) {
			t.Errorf("heavy(%s) = true", light)
		}
	}
}
