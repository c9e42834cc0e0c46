package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"tfd/engine/internal/mmap"
)

// The file names of a model folder's weights, as Hugging Face writes them.
const (
	SingleFile = "model.safetensors"            // all tensors in one file
	IndexFile  = "model.safetensors.index.json" // weight_map from tensor name to shard file
)

// A Checkpoint is a model folder's weights: a single model.safetensors or the shards listed in
// model.safetensors.index.json. Its methods other than Close are safe for concurrent use.
type Checkpoint struct {
	tensors map[string]Tensor
	names   []string       // sorted
	unmaps  []func() error // one per mapped file
	mapped  [][]byte       // the files Open mapped (none from OpenFS), for Release
}

// source is where a checkpoint's files come from: a folder on disk or an fs.FS.
type source struct {
	where string                                          // the folder, for messages
	path  func(name string) string                        // a file's name in messages
	read  func(name string) ([]byte, error)               // small files, copied
	load  func(name string) ([]byte, func() error, error) // weight files, mapped where possible
	maps  bool                                            // load maps the files (package mmap)
}

// Open opens the checkpoint in folder dir. It memory-maps each weight file read-only (on linux and
// darwin; elsewhere it reads them) and validates every header; the tensors' Data point into the
// mappings until Close. If dir holds both a single file and an index, the single file wins, as in
// transformers.
func Open(dir string) (*Checkpoint, error) {
	path := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
	return open(source{
		where: dir,
		path:  path,
		read:  func(name string) ([]byte, error) { return readOS(path(name)) },
		load:  func(name string) ([]byte, func() error, error) { return mapFile(path(name)) },
		maps:  true,
	})
}

// OpenFS opens the checkpoint at the root of fsys, such as an embed.FS holding the bundled model.
// It reads each file with fs.ReadFile, so the tensors' Data live in ordinary memory owned by the
// Checkpoint; Close releases nothing but is still the end of their use.
func OpenFS(fsys fs.FS) (*Checkpoint, error) {
	read := func(name string) ([]byte, error) {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
		return data, nil
	}
	return open(source{
		where: "the file system's root",
		path:  func(name string) string { return name },
		read:  read,
		load: func(name string) ([]byte, func() error, error) {
			data, err := read(name)
			return data, func() error { return nil }, err
		},
	})
}

// mapFile maps one weight file read-only (see package mmap).
func mapFile(path string) ([]byte, func() error, error) {
	data, unmap, err := mmap.Map(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	return data, unmap, nil
}

func readOS(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return data, nil
}

// open finds the checkpoint's files in src and loads them, releasing what it mapped on failure.
func open(src source) (_ *Checkpoint, err error) {
	c := &Checkpoint{tensors: make(map[string]Tensor)}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()

	switch _, err := c.addFile(src, SingleFile); {
	case err == nil:
		return c.finish(), nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	index, err := src.read(IndexFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %s holds no weights: expected %s or %s; "+
			"download the model's safetensors files into it", src.where, SingleFile, IndexFile)
	}
	if err != nil {
		return nil, err
	}
	if err := c.addIndexed(src, index); err != nil {
		return nil, err
	}
	return c.finish(), nil
}

// addFile loads and parses one weight file, adds its tensors and returns their names. An error
// that wraps fs.ErrNotExist means the file is absent.
func (c *Checkpoint) addFile(src source, name string) (added []string, err error) {
	data, unmap, err := src.load(name)
	if err != nil {
		return nil, err
	}
	c.unmaps = append(c.unmaps, unmap)
	if src.maps {
		c.mapped = append(c.mapped, data)
	}
	tensors, err := Parse(src.path(name), data)
	if err != nil {
		return nil, err
	}
	for tname, t := range tensors {
		if _, dup := c.tensors[tname]; dup {
			return nil, fmt.Errorf("safetensors: %s: tensor %q also appears in another shard: "+
				"re-download or re-export the checkpoint", src.path(name), tname)
		}
		c.tensors[tname] = t
		added = append(added, tname)
	}
	return added, nil
}

// index is the part of model.safetensors.index.json that locates tensors.
type index struct {
	WeightMap map[string]string `json:"weight_map"`
}

// addIndexed loads every shard that the index names and checks that each tensor the index lists
// is in the shard it names.
func (c *Checkpoint) addIndexed(src source, data []byte) error {
	indexPath := src.path(IndexFile)
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		return fmt.Errorf("safetensors: %s: not valid JSON (%v): re-download the checkpoint", indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return fmt.Errorf("safetensors: %s has an empty or missing weight_map: re-download the checkpoint", indexPath)
	}
	var shards []string
	for _, shard := range idx.WeightMap {
		if !slices.Contains(shards, shard) {
			shards = append(shards, shard)
		}
	}
	slices.Sort(shards)

	in := make(map[string]string) // tensor name -> the shard it was found in
	for _, shard := range shards {
		// Shards live beside the index; a path that leaves the folder is refused.
		if !fs.ValidPath(shard) || shard == "." {
			return fmt.Errorf("safetensors: %s names shard %q, which is not a file inside %s: "+
				"re-download the checkpoint", indexPath, shard, src.where)
		}
		added, err := c.addFile(src, shard)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("safetensors: %s names shard %q, which is missing from %s: "+
				"download all the model's shard files", indexPath, shard, src.where)
		}
		if err != nil {
			return err
		}
		for _, tname := range added {
			in[tname] = shard
		}
	}
	for _, tname := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		want := idx.WeightMap[tname]
		if got := in[tname]; got != want {
			return fmt.Errorf("safetensors: %s lists tensor %q in %s, but that shard has no such tensor: "+
				"the shards do not match the index; re-download the checkpoint", indexPath, tname, want)
		}
	}
	return nil
}

// finish records the sorted names once loading is complete.
func (c *Checkpoint) finish() *Checkpoint {
	c.names = slices.Sorted(maps.Keys(c.tensors))
	return c
}

// Tensor returns the named tensor and whether the checkpoint has it.
func (c *Checkpoint) Tensor(name string) (Tensor, bool) {
	t, ok := c.tensors[name]
	return t, ok
}

// Names returns the names of all tensors, sorted. The caller owns the slice.
func (c *Checkpoint) Names() []string {
	return slices.Clone(c.names)
}

// Close releases the memory mappings. Tensors obtained from c must not be used afterwards: their
// Data would fault. Close is idempotent; it must not run concurrently with other methods.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, unmap := range c.unmaps {
		errs = append(errs, unmap())
	}
	c.unmaps, c.tensors, c.names, c.mapped = nil, nil, nil, nil
	return errors.Join(errs...)
}

// Release drops the pages of b, a tensor's Data or part of it, from the process's resident memory
// once the caller has copied them (see package mmap's Release); b stays valid, read again from the
// file if used. It releases nothing for a checkpoint from OpenFS, or after Close.
func (c *Checkpoint) Release(b []byte) {
	for _, m := range c.mapped {
		mmap.Release(m, b)
	}
}
