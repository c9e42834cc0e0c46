package kernels

import "fmt"

// quantFormats are the formats the quantized kernels come in, as QMatMulLaunch names them.
var quantFormats = []string{"q8_0", "q4_0", "q4_k", "q6_k", "affine_bf16", "affine_f16", "affine_f32"}

// qmatmulNames and expertQMatMulNames hold each format's qmatmul_F_R and expert_qmatmul_F_R
// kernel names by row group (MatMulRows), made once so that a launch allocates nothing.
var (
	qmatmulNames       = namesByFormatAndRows("qmatmul")
	expertQMatMulNames = namesByFormatAndRows("expert_qmatmul")
)

// namesByFormatAndRows returns, for each of quantFormats, the names prefix_F_R for the row
// groups R of MatMulRows.
func namesByFormatAndRows(prefix string) map[string][len(MatMulRows)]string {
	m := map[string][len(MatMulRows)]string{}
	for _, f := range quantFormats {
		var names [len(MatMulRows)]string
		for i, r := range MatMulRows {
			names[i] = fmt.Sprintf("%s_%s_%d", prefix, f, r)
		}
		m[f] = names
	}
	return m
}

// QuantizeActLaunch is the launch that quantizes the activations of a MatMul with quantized
// weights (quantize_act): blocks blocks of 32 values (rows·in/32), one per SIMD group, four per
// group. It writes blocks·8 words of quants and blocks F32 scales, which QMatMulLaunch's kernel
// reads.
func QuantizeActLaunch(blocks int) Launch { return launch("quantize_act", ceilDiv(blocks, 4), 1) }

// QMatMulLaunch is the launch of MatMul with quantized weights of the given format ("q8_0",
// "q4_0", "q4_k", "q6_k", or "affine_" and the scale dtype's suffix: "affine_bf16", "affine_f16", "affine_f32")
// for rows rows of out output columns: sixteen columns per group (four per SIMD group, eight
// lanes each), and the smallest row group that holds rows, or 16, as MatMulLaunch. R changes no
// bits.
func QMatMulLaunch(format string, rows, out int) Launch {
	g := len(MatMulRows) - 1
	for i, n := range MatMulRows {
		if n >= rows {
			g = i
			break
		}
	}
	names, ok := qmatmulNames[format]
	if !ok {
		panic("kernels: no quantized format " + format)
	}
	return launch(names[g], ceilDiv(out, 16), ceilDiv(rows, MatMulRows[g]))
}

// QEmbedLaunch is the launch of Embed from a quantized table of the given format (as
// QMatMulLaunch names it) for rows tokens of dim elements: a thread per element, rows along x.
func QEmbedLaunch(format string, rows, dim int) Launch {
	return launch("qembed_"+format, rows, ceilDiv(dim, rowBlock))
}

// ExpertQMatMulLaunch is the launch of ExpertMatMul with quantized weights of the given format
// (as QMatMulLaunch names it) for pairs pairs among experts experts, out output columns, after
// QuantizeActLaunch has quantized the rows of x: sixteen columns per group (four per SIMD group,
// eight lanes each), a row of groups per expert, each walking its expert's pairs in row groups of
// the smallest R that holds as many pairs as an expert has on average, or 16, as
// ExpertMatMulLaunch. R changes no bits.
func ExpertQMatMulLaunch(format string, pairs, experts, out int) Launch {
	per := ceilDiv(pairs, max(experts, 1))
	g := len(MatMulRows) - 1
	for i, n := range MatMulRows {
		if n >= per {
			g = i
			break
		}
	}
	names, ok := expertQMatMulNames[format]
	if !ok {
		panic("kernels: no quantized format " + format)
	}
	return launch(names[g], ceilDiv(out, 16), experts)
}
