package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"tfd/compute"
	"tfd/quant"
)

// GPT-OSS stores a layer's experts as whole tensors, each projection of every expert in one, in
// one of two forms. transformers' own (the bf16 form people convert to) keeps the matrices
// [in, out]: gate_up_proj [E, hidden, 2·inter], with gate and up interleaved along its last
// dimension (gate the even columns, up the odd), and down_proj [E, inter, hidden]. openai's
// (openai/gpt-oss-20b) packs them as MXFP4 [out, in]: gate_up_proj_blocks [E, 2·inter,
// hidden/32, 16] with gate and up interleaved by row, and down_proj_blocks [E, hidden, inter/32,
// 16], with their _scales. Both forms have gate_up_proj_bias [E, 2·inter] and down_proj_bias
// [E, hidden]. The loader turns either into ExpertMatMul's [experts, out, in], gate and up apart:
// the bf16 form transposed in its own dtype, the MXFP4 form as stored, its rows regrouped; the
// biases widened to F32. A GGUF file holds a third form, llama.cpp's, already [experts, out, in]
// with gate and up apart (ggufgptoss.go), which loadSplitExperts takes as it is.

// loadGptOssExperts uploads a GPT-OSS layer's experts and their biases.
func loadGptOssExperts(u *uploader, c Config, prefix string, l *layerWeights) error {
	e, inter, hidden := c.MoE.Experts, c.MoE.Intermediate, c.Hidden
	name := func(s string) string { return prefix + "mlp.experts." + s }
	if t, ok, err := u.ckpt.tensor(name("gate_proj.weight")); err != nil {
		return err
	} else if ok {
		return loadSplitExperts(u, c, prefix, l, t)
	}
	x, err := readGptOssExperts(u, c, name)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		dst   *compute.Tensor
		t     stored
		shape []int
	}{
		{&l.expertGate, x.gate, []int{e, inter, hidden}},
		{&l.expertUp, x.up, []int{e, inter, hidden}},
		{&l.expertDown, x.down, []int{e, hidden, inter}},
		{&l.expertGateBias, x.gateBias, []int{e, inter}},
		{&l.expertUpBias, x.upBias, []int{e, inter}},
		{&l.expertDownBias, x.downBias, []int{e, hidden}},
	} {
		ct, err := u.upload(s.t.name, s.t, s.shape)
		if err != nil {
			return err
		}
		*s.dst = ct
	}
	return nil
}

// gptOssExperts are a GPT-OSS layer's experts as the engine runs them: gate, up and down apart,
// [experts, out, in] (MXFP4 as stored, other types transposed from the checkpoint's [in, out]),
// and their biases apart, F32 [experts, out].
type gptOssExperts struct{ gate, up, down, gateBias, upBias, downBias stored }

// readGptOssExperts reads a layer's fused expert tensors as transformers or openai store them
// (gate and up interleaved in gate_up_proj; name gives each tensor's full name) for the loader
// and for ExportGGUF alike.
func readGptOssExperts(u *uploader, c Config, name func(string) string) (gptOssExperts, error) {
	e, inter, hidden := c.MoE.Experts, c.MoE.Intermediate, c.Hidden
	var x gptOssExperts
	if c.MoE.MXFP4 {
		gu, err := mxfp4Experts(u, name("gate_up_proj"), e, 2*inter, hidden)
		if err != nil {
			return x, err
		}
		d, err := mxfp4Experts(u, name("down_proj"), e, hidden, inter)
		if err != nil {
			return x, err
		}
		x.gate, x.up, x.down = gu.rows(0, 2), gu.rows(1, 2), d.rows(0, 1)
	} else {
		gu, err := need(u, name("gate_up_proj"), e, hidden, 2*inter)
		if err != nil {
			return x, err
		}
		d, err := need(u, name("down_proj"), e, inter, hidden)
		if err != nil {
			return x, err
		}
		x.gate, x.up, x.down = transposeColumns(gu, 0, 2), transposeColumns(gu, 1, 2), transposeColumns(d, 0, 1)
	}
	guBias, err := need(u, name("gate_up_proj_bias"), e, 2*inter)
	if err != nil {
		return x, err
	}
	downBias, err := need(u, name("down_proj_bias"), e, hidden)
	if err != nil {
		return x, err
	}
	x.gateBias, x.upBias, x.downBias = f32Columns(guBias, 0, 2), f32Columns(guBias, 1, 2), f32Columns(downBias, 0, 1)
	return x, nil
}

// loadSplitExperts uploads a GPT-OSS layer's experts in llama.cpp's form (a GGUF file's), gate,
// up and down apart, [experts, out, in] in a float dtype or compute.MXFP4, and their biases
// apart, [experts, out]; gate is the gate stack, read already.
func loadSplitExperts(u *uploader, c Config, prefix string, l *layerWeights, gate stored) error {
	e, inter, hidden := c.MoE.Experts, c.MoE.Intermediate, c.Hidden
	name := func(s string) string { return prefix + "mlp.experts." + s }
	gate, err := checkNeeded(u, name("gate_proj.weight"), gate, true, nil, e, inter, hidden)
	if err != nil {
		return err
	}
	for _, s := range []struct {
		dst   *compute.Tensor
		name  string
		shape []int
		bias  bool
	}{
		{&l.expertGate, "gate_proj.weight", []int{e, inter, hidden}, false},
		{&l.expertUp, "up_proj.weight", []int{e, inter, hidden}, false},
		{&l.expertDown, "down_proj.weight", []int{e, hidden, inter}, false},
		{&l.expertGateBias, "gate_proj.bias", []int{e, inter}, true},
		{&l.expertUpBias, "up_proj.bias", []int{e, inter}, true},
		{&l.expertDownBias, "down_proj.bias", []int{e, hidden}, true},
	} {
		t := gate
		if s.name != "gate_proj.weight" {
			if t, err = need(u, name(s.name), s.shape...); err != nil {
				return err
			}
		}
		if s.bias {
			t = f32Columns(t, 0, 1) // widened exactly, as ExpertMatMul takes them
		}
		ct, err := u.upload(t.name, t, s.shape)
		if err != nil {
			return err
		}
		*s.dst = ct
	}
	return nil
}

// need returns the named tensor, which must be F32, F16 or BF16 (or, from a GGUF file,
// compute.MXFP4) of the given shape.
func need(u *uploader, name string, shape ...int) (stored, error) {
	t, ok, err := u.ckpt.tensor(name)
	return checkNeeded(u, name, t, ok, err, shape...)
}

// checkNeeded checks the tensor that need read.
func checkNeeded(u *uploader, name string, t stored, ok bool, err error, shape ...int) (stored, error) {
	switch {
	case err != nil:
		return t, err
	case !ok:
		return t, fmt.Errorf("engine: the checkpoint has no tensor %s", u.ckpt.fileName(name))
	case t.mlx != nil || t.bytes:
		return t, fmt.Errorf("engine: tensor %s is packed; tfd reads GPT-OSS's experts in F32, F16 or BF16, or as MXFP4 _blocks and _scales with quantization_config mxfp4", t.name)
	case !slices.Equal(t.shape, shape):
		return t, fmt.Errorf("engine: tensor %s has shape %v, %s implies %v", t.name, t.shape, u.ckpt.configName(), shape)
	}
	return t, nil
}

// transposeColumns returns, from t of [E, K, N], the matrices [E, M, K] whose row o is t's column
// first+o·step (M = N/step), in t's dtype: GPT-OSS's [in, out] experts as [out, in], gate and up
// taken apart.
func transposeColumns(t stored, first, step int) stored {
	e, k, n := t.shape[0], t.shape[1], t.shape[2]
	m, size := n/step, t.dtype.Size()
	out := stored{name: fmt.Sprintf("%s (columns %d::%d, transposed)", t.name, first, step), dtype: t.dtype,
		shape: []int{e, m, k}, data: make([]byte, e*m*k*size)}
	// In tiles of 64×64 elements, so that the rows read and the rows written stay in cache (an
	// expert of GPT-OSS-20B is 2880×5760).
	const tile = 64
	for x := range e {
		for i0 := 0; i0 < k; i0 += tile {
			for o0 := 0; o0 < m; o0 += tile {
				for i := i0; i < min(i0+tile, k); i++ {
					for o := o0; o < min(o0+tile, m); o++ {
						src := ((x*k+i)*n + first + o*step) * size
						dst := ((x*m+o)*k + i) * size
						copy(out.data[dst:dst+size], t.data[src:src+size])
					}
				}
			}
		}
	}
	return out
}

// f32Columns returns, from t of [E, N], the F32 matrix [E, N/step] of t's columns first,
// first+step, …: the experts' biases, gate's and up's apart, widened exactly as ExpertMatMul
// takes them.
func f32Columns(t stored, first, step int) stored {
	w, _ := storedFloats(t) // need checked the dtype
	e, n := t.shape[0], t.shape[1]
	m := n / step
	out := stored{name: fmt.Sprintf("%s (columns %d::%d)", t.name, first, step), dtype: compute.F32,
		shape: []int{e, m}, data: make([]byte, 4*e*m)}
	for x := range e {
		for o := range m {
			binary.LittleEndian.PutUint32(out.data[4*(x*m+o):], math.Float32bits(w[x*n+first+o*step]))
		}
	}
	return out
}

// mxfp4Matrices is a projection of every expert as MXFP4, rows [E, rows] of in weights each: the
// codes and scales of each row as the checkpoint stores them.
type mxfp4Matrices struct {
	name                string
	e, nrows, in        int
	codes, scales       []byte // [E, rows, in/2] and [E, rows, in/32]
	rowCodes, rowScales int
}

// mxfp4Experts reads name_blocks and name_scales, the MXFP4 form of an [E, rows, in] projection.
func mxfp4Experts(u *uploader, name string, e, nrows, in int) (mxfp4Matrices, error) {
	g := in / quant.BlockSize
	m := mxfp4Matrices{name: name, e: e, nrows: nrows, in: in, rowCodes: quant.MXFP4RowCodes(in), rowScales: quant.MXFP4RowScales(in)}
	if in%quant.BlockSize != 0 {
		return m, fmt.Errorf("engine: %s: rows of %d weights are no whole number of MXFP4's blocks of 32", name, in)
	}
	for _, part := range []struct {
		suffix string
		shape  []int
		dst    *[]byte
	}{
		{"_blocks", []int{e, nrows, g, quant.BlockSize / 2}, &m.codes},
		{"_scales", []int{e, nrows, g}, &m.scales},
	} {
		t, ok, err := u.ckpt.tensor(name + part.suffix)
		switch {
		case err != nil:
			return m, err
		case !ok:
			return m, fmt.Errorf("engine: the checkpoint has no tensor %s; %s says its experts are MXFP4 (quantization_config)", u.ckpt.fileName(name+part.suffix), u.ckpt.configName())
		case !t.bytes:
			return m, fmt.Errorf("engine: tensor %s is %v; MXFP4 blocks and scales are U8", t.name, t.dtype)
		case !slices.Equal(t.shape, part.shape):
			return m, fmt.Errorf("engine: tensor %s has shape %v, %s implies %v", t.name, t.shape, u.ckpt.configName(), part.shape)
		}
		*part.dst = t.data
	}
	return m, nil
}

// rows returns the matrices of rows first, first+step, … of every expert as one compute.MXFP4
// tensor's bytes: their codes, then their scales (gate and up taken apart by row).
func (m mxfp4Matrices) rows(first, step int) stored {
	n := m.nrows / step
	codes := make([]byte, 0, m.e*n*(m.rowCodes+m.rowScales)) // room for the scales appended after
	scales := make([]byte, 0, m.e*n*m.rowScales)
	for x := range m.e {
		for o := range n {
			r := x*m.nrows + first + o*step
			codes = append(codes, m.codes[r*m.rowCodes:(r+1)*m.rowCodes]...)
			scales = append(scales, m.scales[r*m.rowScales:(r+1)*m.rowScales]...)
		}
	}
	return stored{name: fmt.Sprintf("%s_blocks (rows %d::%d)", m.name, first, step), dtype: compute.MXFP4,
		shape: []int{m.e, n, m.in}, data: append(codes, scales...)}
}
