package cuda

import (
	"slices"
	"strings"
	"testing"

	"tfd/kernels"
)

// TestMatMulAfterMatMulIsNotDependent records launches, as a forward would, on a backend with no
// device (nothing runs: the worker is never started) and reads back which the worker would launch
// dependent: all of a forward of up to pdlRows rows, but with serialMatMuls a matmul straight
// after a matmul; none past pdlRows.
func TestMatMulAfterMatMulIsNotDependent(t *testing.T) {
	mm := &kernel{name: "matmul_mma_packed_bf16_1", threads: 128, params: 1, streams: true}
	norm := &kernel{name: "rmsnorm_row", threads: 256, params: 1}
	seq := []*kernel{mm, mm, norm, mm, norm, norm, mm, mm, mm, norm}
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
		b := &backend{w: newWorker(), pdlRows: pdlRows, forwardRows: tc.rows, serialMatMuls: tc.serial}
		for i, k := range seq {
			b.launch(k, 1, 1, uint64(i))
		}
		var got []bool
		for _, c := range b.w.cur.cmds[:b.w.cur.n] {
			got = append(got, c.dependent)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%d rows, serial %v: launched dependent %v, want %v", tc.rows, tc.serial, got, tc.want)
		}
	}
}

// TestStreamsWeightsNamesTheMatMuls checks streamsWeights against tfd/kernels' own names: every
// family it counts exists (a renamed one would silently leave the rule), and no kernel outside the
// matmuls counts.
func TestStreamsWeightsNamesTheMatMuls(t *testing.T) {
	found := map[string]bool{}
	for _, k := range kernels.All() {
		streams := streamsWeights(k.Name)
		family, _, _ := strings.Cut(k.Name, "_")
		if strings.HasPrefix(k.Name, "expert_") {
			family = "expert_" + strings.SplitN(k.Name, "_", 3)[1]
		}
		switch family {
		case "matmul", "qmatmul", "expert_matmul", "expert_qmatmul":
			found[family] = true
			if !streams {
				t.Errorf("%s: a matmul not counted as streaming its weights", k.Name)
			}
		default:
			if streams {
				t.Errorf("%s: counted as a matmul", k.Name)
			}
		}
	}
	for _, f := range []string{"matmul", "qmatmul", "expert_matmul", "expert_qmatmul"} {
		if !found[f] {
			t.Errorf("tfd/kernels has no %s_… kernel: streamsWeights names a family that is gone", f)
		}
	}
}
