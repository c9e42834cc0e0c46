// Command gguf writes a model tfd loads from a Hugging Face folder as a GGUF file, as llama.cpp's
// convert_hf_to_gguf.py would write it (see engine.ExportGGUF): for tests and for comparisons
// with llama.cpp on the same weights (tools/llamacpp).
//
//	go run ./tools/gguf -dtype f16 -o /tmp/gopher-f16.gguf            # the bundled model
//	go run ./tools/gguf -model path/to/hf-folder -dtype bf16 -o m.gguf
//	go run ./tools/gguf -dtype q8_0 -o /tmp/gopher-q8_0.gguf
//
// q8_0 and q4_0 quantize the weight matrices with ggml's reference quantizers; q4_0 keeps the
// embedding table and the output head in q8_0, as model.quantize = "q4" does. q4_k and q6_k
// (ggml's reference quantizers too) keep the table and the head in q6_k, and write matrices whose
// rows are not whole super-blocks of 256 in q8_0.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"tfd/compute"
	"tfd/engine"
	"tfd/models"
)

func main() {
	model := flag.String("model", "", "Hugging Face model folder; empty: the bundled model")
	dtype := flag.String("dtype", "f16", "dtype of the matrices: f32, f16, bf16, q8_0, q4_0, q4_k or q6_k (1-D tensors are f32)")
	out := flag.String("o", "", "the GGUF file to write")
	flag.Parse()
	if err := run(*model, *dtype, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gguf:", err)
		os.Exit(1)
	}
}

func run(model, dtype, out string) error {
	dt, ok := map[string]compute.DType{"f32": compute.F32, "f16": compute.F16, "bf16": compute.BF16,
		"q8_0": compute.Q8_0, "q4_0": compute.Q4_0, "q4_k": compute.Q4_K, "q6_k": compute.Q6_K}[strings.ToLower(dtype)]
	if !ok {
		return fmt.Errorf("-dtype %q: want f32, f16, bf16, q8_0, q4_0, q4_k or q6_k", dtype)
	}
	if out == "" {
		return fmt.Errorf("-o: name the file to write")
	}
	src := engine.Source{Dir: model}
	if model == "" {
		src = engine.Source{FS: models.FS(), Name: models.Name}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = engine.ExportGGUF(src, dt, bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", out)
	return nil
}
