package engine_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"tfd/batch"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/engine/safetensors"
)

// TestQwen3NextAgainstFloat64 runs the Qwen3-Next fixture through a plain float64 forward written
// from transformers' modeling_qwen3_next.py (the DeltaNet's recurrent form, its head-interleaved
// projections read as transformers reads them, partial rotary unpermuted), and demands the
// engine's logits within 5e-5 of each row's largest at every position of every oracle prompt. It
// logs how far the oracle's logits (transformers' recurrent form in float32) are from it: two
// forwards written apart, so a small distance says both read the checkpoint alike.
func TestQwen3NextAgainstFloat64(t *testing.T) {
	o := enginetest.Read(t, "qwen3next")
	dir := filepath.Join(enginetest.RepoRoot(t), o.Model)
	ref := newRef64(t, dir)
	m := enginetest.Load(t, openCPU(t), o.Model, engine.Options{MaxRows: 128})
	var worstEngine, worstOracle float64
	for ci, c := range o.Cases {
		exact := ref.logits(c.Prompt)
		rows := make([]batch.Row, len(c.Prompt))
		for i, tok := range c.Prompt {
			rows[i] = batch.Row{Pos: i, Token: tok, Logits: true}
		}
		got, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		for p := range c.Prompt {
			g, w := got[p*o.Vocab:(p+1)*o.Vocab], o.Logits[c.LogitsOffset+p*o.Vocab:c.LogitsOffset+(p+1)*o.Vocab]
			var scale, dg, dw float64
			for i, x := range exact[p] {
				scale = max(scale, math.Abs(x))
				dg = max(dg, math.Abs(float64(g[i])-x))
				dw = max(dw, math.Abs(float64(w[i])-x))
			}
			worstEngine, worstOracle = max(worstEngine, dg/scale), max(worstOracle, dw/scale)
			if dg > 5e-5*scale {
				t.Errorf("case %d position %d: the engine is %.3g of the row's largest logit from float64", ci, p, dg/scale)
			}
		}
	}
	t.Logf("worst distance from float64, as a share of the row's largest logit: the engine %.3g, the oracle (transformers' recurrent form) %.3g", worstEngine, worstOracle)
}

// ref64 is Qwen3-Next in float64, position by position, from a safetensors folder.
type ref64 struct {
	c   engine.Config
	ckp *safetensors.Checkpoint
}

func newRef64(t *testing.T, dir string) *ref64 {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := engine.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	ckp, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ckp.Close() })
	return &ref64{c: c, ckp: ckp}
}

// w returns an F32 tensor's values as float64.
func (r *ref64) w(name string) []float64 {
	t, ok := r.ckp.Tensor(name)
	if !ok || t.DType != "F32" {
		panic("ref64: no F32 tensor " + name)
	}
	out := make([]float64, len(t.Data)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])))
	}
	return out
}

func matVec(w, x []float64) []float64 {
	y := make([]float64, len(w)/len(x))
	for o := range y {
		for i, xi := range x {
			y[o] += w[o*len(x)+i] * xi
		}
	}
	return y
}

// rmsNorm64 is x/√(mean x² + eps)·(1 + w), or ·w when plain.
func rmsNorm64(x, w []float64, eps float64, plain bool) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	inv := 1 / math.Sqrt(s/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		if plain {
			y[i] = x[i] * inv * w[i]
		} else {
			y[i] = x[i] * inv * (1 + w[i])
		}
	}
	return y
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64    { return x * sigmoid64(x) }

// logits returns the logits at every position of prompt.
func (r *ref64) logits(prompt []int32) [][]float64 {
	c := r.c
	eps := float64(c.NormEps)
	emb := r.w("model.embed_tokens.weight")
	x := make([][]float64, len(prompt))
	for p, tok := range prompt {
		x[p] = append([]float64(nil), emb[int(tok)*c.Hidden:(int(tok)+1)*c.Hidden]...)
	}
	for l := range c.Layers {
		pre := fmt.Sprintf("model.layers.%d.", l)
		h := make([][]float64, len(x))
		for p := range x {
			h[p] = rmsNorm64(x[p], r.w(pre+"input_layernorm.weight"), eps, false)
		}
		var mixed [][]float64
		if c.Next.Linear[l] {
			mixed = r.deltaNet(pre+"linear_attn.", h)
		} else {
			mixed = r.attention(pre+"self_attn.", h)
		}
		for p := range x {
			for i := range x[p] {
				x[p][i] += mixed[p][i]
			}
			y := r.moe(pre+"mlp.", rmsNorm64(x[p], r.w(pre+"post_attention_layernorm.weight"), eps, false))
			for i := range x[p] {
				x[p][i] += y[i]
			}
		}
	}
	out := make([][]float64, len(x))
	for p := range x {
		out[p] = matVec(r.w("lm_head.weight"), rmsNorm64(x[p], r.w("model.norm.weight"), eps, false))
	}
	return out
}

// moe is a sparse layer's experts (softmax, top k, renormalised) plus its gated shared expert.
func (r *ref64) moe(pre string, h []float64) []float64 {
	moe := r.c.MoE
	scores := matVec(r.w(pre+"gate.weight"), h)
	top, sum := make([]int, 0, moe.PerToken), 0.0
	for range moe.PerToken {
		best := -1
		for e, s := range scores {
			taken := false
			for _, u := range top {
				taken = taken || u == e
			}
			if !taken && (best < 0 || s > scores[best]) {
				best = e
			}
		}
		top = append(top, best)
	}
	for _, e := range top {
		sum += math.Exp(scores[e] - scores[top[0]])
	}
	mlp := func(p string) []float64 {
		g, u := matVec(r.w(p+"gate_proj.weight"), h), matVec(r.w(p+"up_proj.weight"), h)
		for i := range g {
			g[i] = silu64(g[i]) * u[i]
		}
		return matVec(r.w(p+"down_proj.weight"), g)
	}
	out := make([]float64, len(h))
	for _, e := range top {
		y, weight := mlp(fmt.Sprintf("%sexperts.%d.", pre, e)), math.Exp(scores[e]-scores[top[0]])/sum
		for i := range out {
			out[i] += weight * y[i]
		}
	}
	shared, gate := mlp(pre+"shared_expert."), sigmoid64(matVec(r.w(pre+"shared_expert_gate.weight"), h)[0])
	for i := range out {
		out[i] += gate * shared[i]
	}
	return out
}

// attention is a gated attention layer: q_proj's per-head [query, gate], q/k norms, partial
// rotary over the first RotaryDim dimensions, causal softmax, output · sigmoid(gate).
func (r *ref64) attention(pre string, h [][]float64) [][]float64 {
	c := r.c
	hd, rot, eps := c.HeadDim, c.Next.RotaryDim, float64(c.NormEps)
	group := c.Heads / c.KVHeads
	rope := func(x []float64, p int) {
		for i := range rot / 2 {
			a := float64(p) / math.Pow(c.Rope.Theta, float64(2*i)/float64(rot))
			x0, x1 := x[i], x[i+rot/2]
			x[i], x[i+rot/2] = x0*math.Cos(a)-x1*math.Sin(a), x1*math.Cos(a)+x0*math.Sin(a)
		}
	}
	type token struct{ q, gate, k, v [][]float64 }
	toks := make([]token, len(h))
	for p := range h {
		q, k, v := matVec(r.w(pre+"q_proj.weight"), h[p]), matVec(r.w(pre+"k_proj.weight"), h[p]), matVec(r.w(pre+"v_proj.weight"), h[p])
		for head := range c.Heads {
			qh := rmsNorm64(q[2*head*hd:2*head*hd+hd], r.w(pre+"q_norm.weight"), eps, false)
			rope(qh, p)
			toks[p].q, toks[p].gate = append(toks[p].q, qh), append(toks[p].gate, q[2*head*hd+hd:2*(head+1)*hd])
		}
		for head := range c.KVHeads {
			kh := rmsNorm64(k[head*hd:(head+1)*hd], r.w(pre+"k_norm.weight"), eps, false)
			rope(kh, p)
			toks[p].k, toks[p].v = append(toks[p].k, kh), append(toks[p].v, v[head*hd:(head+1)*hd])
		}
	}
	out := make([][]float64, len(h))
	for p := range h {
		att := make([]float64, c.Heads*hd)
		for head := range c.Heads {
			kv := head / group
			w, top := make([]float64, p+1), math.Inf(-1)
			for j := range w {
				for i := range hd {
					w[j] += toks[p].q[head][i] * toks[j].k[kv][i]
				}
				w[j] /= math.Sqrt(float64(hd))
				top = max(top, w[j])
			}
			var sum float64
			for j := range w {
				w[j] = math.Exp(w[j] - top)
				sum += w[j]
			}
			for i := range hd {
				for j := range w {
					att[head*hd+i] += w[j] / sum * toks[j].v[kv][i]
				}
				att[head*hd+i] *= sigmoid64(toks[p].gate[head][i])
			}
		}
		out[p] = matVec(r.w(pre+"o_proj.weight"), att)
	}
	return out
}

// deltaNet is a gated DeltaNet layer in its recurrent form.
func (r *ref64) deltaNet(pre string, h [][]float64) [][]float64 {
	n := r.c.Next
	kh, vh, kd, vd := n.Delta()
	per, keyDim := vh/kh, kh*kd
	group := 2*kd + 2*per*vd
	conv, aLog, dtBias := r.w(pre+"conv1d.weight"), r.w(pre+"A_log"), r.w(pre+"dt_bias")
	// fix_query_key_value_ordering: group g holds q, k, v, z of its heads; then b, a.
	mixed, z, b, a := make([][]float64, len(h)), make([][]float64, len(h)), make([][]float64, len(h)), make([][]float64, len(h))
	for p := range h {
		y, yba := matVec(r.w(pre+"in_proj_qkvz.weight"), h[p]), matVec(r.w(pre+"in_proj_ba.weight"), h[p])
		var q, k, v []float64
		for g := range kh {
			blk := y[g*group : (g+1)*group]
			q, k = append(q, blk[:kd]...), append(k, blk[kd:2*kd]...)
			v, z[p] = append(v, blk[2*kd:2*kd+per*vd]...), append(z[p], blk[2*kd+per*vd:]...)
			b[p], a[p] = append(b[p], yba[g*2*per:g*2*per+per]...), append(a[p], yba[g*2*per+per:(g+1)*2*per]...)
		}
		mixed[p] = append(append(q, k...), v...)
	}
	l2 := func(x []float64, scale float64) []float64 {
		var s float64
		for _, v := range x {
			s += v * v
		}
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] / math.Sqrt(s+1e-6) * scale
		}
		return y
	}
	states := make([][]float64, vh) // [kd, vd] each
	for i := range states {
		states[i] = make([]float64, kd*vd)
	}
	out := make([][]float64, len(h))
	for p := range h {
		x := make([]float64, len(mixed[p])) // the causal convolution, zero before position 0, and SiLU
		for ch := range x {
			for j := range n.ConvKernel {
				if t := p - n.ConvKernel + 1 + j; t >= 0 {
					x[ch] += conv[ch*n.ConvKernel+j] * mixed[t][ch]
				}
			}
			x[ch] = silu64(x[ch])
		}
		core := make([]float64, vh*vd)
		for head := range vh {
			g := head / per
			q, k := l2(x[g*kd:(g+1)*kd], 1/math.Sqrt(float64(kd))), l2(x[keyDim+g*kd:keyDim+(g+1)*kd], 1)
			v := x[2*keyDim+head*vd : 2*keyDim+(head+1)*vd]
			sp := a[p][head] + dtBias[head]
			if sp <= 20 {
				sp = math.Log1p(math.Exp(sp))
			}
			decay, beta := math.Exp(-math.Exp(aLog[head])*sp), sigmoid64(b[p][head])
			S := states[head]
			for j := range vd {
				var u float64
				for i := range kd {
					S[i*vd+j] *= decay
					u += S[i*vd+j] * k[i]
				}
				delta := (v[j] - u) * beta
				for i := range kd {
					S[i*vd+j] += k[i] * delta
					core[head*vd+j] += S[i*vd+j] * q[i]
				}
			}
			// RMSNormGated: normed, times w (plain), times silu(z)
			normed := rmsNorm64(core[head*vd:(head+1)*vd], r.w(pre+"norm.weight"), float64(r.c.NormEps), true)
			for j := range vd {
				core[head*vd+j] = normed[j] * silu64(z[p][head*vd+j])
			}
		}
		out[p] = matVec(r.w(pre+"out_proj.weight"), core)
	}
	return out
}
