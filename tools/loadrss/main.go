// Command loadrss measures the peak resident memory of loading a model on the cpu backend: each
// load runs in a child process that loads the model, runs one forward of eight tokens (so that
// every weight is read, wherever it lies) and exits, and the parent reads the child's peak RSS
// from getrusage (ru_maxrss, which counts the file's mapped pages as well as the heap). Each model
// loads two ways, interleaved over the rounds: "in place", as tfd loads, the cpu backend using the
// checkpoint's mapped bytes (compute.InPlaceUploader), and "copy", the backend hidden behind a
// wrapper that offers only compute.Backend, so that it copies every tensor as it did before.
//
//	go run ./tools/loadrss -qwen3-0.6b /tmp/qwen3-0.6b models/gopher /tmp/qwen3-0.6b
//
// -qwen3-0.6b DIR first writes, unless DIR holds one already, a checkpoint of Qwen3-0.6B's shapes
// and config.json with random BF16 weights (1.2 GB; the bundled model's tokenizer).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"tfd/batch"
	"tfd/compute"
	_ "tfd/cpu"
	"tfd/engine"
	"tfd/models"
	"tfd/tools/qwen3shape"
)

func main() {
	child := flag.String("child", "", "internal: load this model in this process and exit")
	copied := flag.Bool("copy", false, "internal, with -child: hide compute.InPlaceUploader, so that every tensor is copied")
	qwen := flag.String("qwen3-0.6b", "", "write a random Qwen3-0.6B-shaped checkpoint into this folder first, unless it holds one")
	rounds := flag.Int("rounds", 3, "loads of each model each way, interleaved")
	flag.Parse()
	if *child != "" {
		if err := load(*child, *copied); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *qwen != "" {
		if err := qwen3shape.Write(*qwen, models.FS()); err != nil {
			log.Fatal(err)
		}
	}
	if flag.NArg() == 0 {
		log.Fatal("loadrss: name the model folders to load")
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	for _, dir := range flag.Args() {
		rss := map[bool][]int64{}
		for range *rounds {
			for _, c := range []bool{true, false} {
				kib, err := measure(self, dir, c)
				if err != nil {
					log.Fatal(err)
				}
				rss[c] = append(rss[c], kib)
			}
		}
		copyMiB, inPlaceMiB := median(rss[true])/1024, median(rss[false])/1024
		fmt.Printf("%s: peak RSS, median of %d: copy %d MiB, in place %d MiB (%.2fx); copy %v KiB, in place %v KiB\n",
			dir, *rounds, copyMiB, inPlaceMiB, float64(inPlaceMiB)/float64(copyMiB), rss[true], rss[false])
	}
}

// measure runs one load of dir in a child and returns its peak RSS in KiB.
func measure(self, dir string, copied bool) (int64, error) {
	cmd := exec.Command(self, "-child", dir, fmt.Sprintf("-copy=%v", copied))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("loading %s (copy %v): %w", dir, copied, err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, fmt.Errorf("loadrss: no getrusage on this platform")
	}
	return ru.Maxrss, nil // KiB on linux
}

// copyingBackend offers only compute.Backend's methods, hiding compute.InPlaceUploader.
type copyingBackend struct{ compute.Backend }

// load loads dir on the cpu backend and runs one forward of eight tokens.
func load(dir string, copied bool) error {
	be, err := compute.Open("cpu")
	if err != nil {
		return err
	}
	defer be.Close()
	if copied {
		be = copyingBackend{be}
	}
	start := time.Now()
	m, err := engine.Load(context.Background(), engine.Source{Dir: dir}, be, engine.Options{Context: 64, MaxRows: 8})
	if err != nil {
		return err
	}
	defer m.Close()
	loaded := time.Since(start)
	rows := make([]batch.Row, 8)
	for i := range rows {
		rows[i] = batch.Row{Pos: i, Token: int32(1 + i), Logits: i == len(rows)-1}
	}
	if _, err := m.Forward(context.Background(), rows); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s copy=%v: loaded in %v, forward in %v\n", dir, copied, loaded.Round(time.Millisecond), (time.Since(start) - loaded).Round(time.Millisecond))
	return nil
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
