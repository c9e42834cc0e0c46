// Command kernelsrc prints the source the backends compile: kernels.CUDA(), as NVRTC reads it, or
// kernels.Metal(). It is for reading a kernel as emitted, and for programs outside Go that time
// tfd's own kernels beside variants (tools/bench/onerow.cu):
//
//	go run ./tools/kernelsrc >bin/tfd_kernels.cuh
//	go run ./tools/kernelsrc -lang metal >bin/tfd_kernels.metal
package main

import (
	"flag"
	"fmt"
	"os"

	"tfd/kernels"
)

func main() {
	lang := flag.String("lang", "cuda", "the source to print: cuda or metal")
	flag.Parse()
	switch *lang {
	case "cuda":
		fmt.Print(kernels.CUDA())
	case "metal":
		fmt.Print(kernels.Metal())
	default:
		fmt.Fprintf(os.Stderr, "kernelsrc: -lang %q: want cuda or metal\n", *lang)
		os.Exit(2)
	}
}
