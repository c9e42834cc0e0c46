package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Ref is what a pull asks for: a repo, and perhaps one file of it.
type Ref struct {
	Repo string // owner/name
	File string // a path in the repo; empty: the files tfd needs of a model folder
}

func (r Ref) String() string {
	if r.File == "" {
		return r.Repo
	}
	return r.Repo + ":" + r.File
}

// ParseRef parses REPO or REPO:FILE (a repo id never holds a colon).
func ParseRef(s string) (Ref, error) {
	repo, file, colon := strings.Cut(s, ":")
	if err := CheckRepo(repo); err != nil {
		return Ref{}, err
	}
	if colon && file == "" {
		return Ref{}, fmt.Errorf("hub: %q names no file after the colon: want REPO or REPO:FILE", s)
	}
	if file != "" {
		if err := checkName(file); err != nil {
			return Ref{}, err
		}
	}
	return Ref{Repo: repo, File: file}, nil
}

// checkName refuses a file name that would land outside the repo's folder.
func checkName(name string) error {
	if !filepath.IsLocal(filepath.FromSlash(name)) || strings.Contains(name, `\`) || path.Clean(name) != name {
		return fmt.Errorf("hub: %q is not a file path inside a repo", name)
	}
	return nil
}

// Folder returns the folder a repo's files go to in the models folder dir: the repo id's owner
// and name as nested folders (dir/Qwen/Qwen3-0.6B), as the hub's own addresses read, so that the
// folder's name, which tfd serves a model under unless model.name says otherwise, is the repo's.
func Folder(dir, repo string) string {
	return filepath.Join(dir, filepath.FromSlash(repo))
}

// metadataFiles are the files tfd reads beside the weights of a model folder, where the repo has
// them: the architecture, the generation defaults, the tokenizer and the chat template (in
// tokenizer_config.json, or in a file of its own as newer transformers saves it).
var metadataFiles = []string{
	"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"chat_template.jinja", "chat_template.json",
}

// The weights of a model folder: one file, or shards named by an index (as transformers saves
// them, and as the engine opens them).
const (
	singleWeights = "model.safetensors"
	weightsIndex  = "model.safetensors.index.json"
)

// Result says what a Pull did.
type Result struct {
	Ref    Ref
	Commit string
	// Path is what model.path names: the repo's folder, or for a Ref with a File, that file.
	Path string
	// Files are the files pulled, in the order fetched.
	Files []Pulled
	// Missing lists files tfd reads that the repo lacks (tokenizer.json): the pull succeeded,
	// but serving the folder will fail without them.
	Missing []string
}

// Pulled is one file of a pull.
type Pulled struct {
	Name    string
	Size    int64
	Fetched bool // false: it was in place and verified already
}

// Bytes returns the size of all the files.
func (r *Result) Bytes() int64 {
	var n int64
	for _, f := range r.Files {
		n += max(f.Size, 0)
	}
	return n
}

// Pull fetches ref at revision (empty: main) into its folder in the models folder dir (see
// Folder), each file through Fetch, so an interrupted pull continues where it stopped. For a Ref
// without a File it fetches what tfd needs of a model folder: metadataFiles and the safetensors
// weights (model.safetensors, or the index and the shards it names), and nothing else: no other
// weight formats, no README or its images. For a Ref with a File it fetches that file alone.
// It stops at the first file that fails.
func (c *Client) Pull(ctx context.Context, ref Ref, revision, dir string, p Progress) (*Result, error) {
	l, err := c.List(ctx, ref.Repo, revision)
	if err != nil {
		return nil, err
	}
	folder := Folder(dir, ref.Repo)
	res := &Result{Ref: ref, Commit: l.Commit, Path: folder}
	fetch := func(f File) error {
		if err := checkName(f.Name); err != nil {
			return fmt.Errorf("hub: %s lists a file that would land outside its folder: %w", ref.Repo, err)
		}
		fetched, err := c.Fetch(ctx, l, f, filepath.Join(folder, filepath.FromSlash(f.Name)), p)
		if err == nil {
			res.Files = append(res.Files, Pulled{f.Name, f.Size, fetched})
		}
		return err
	}
	if ref.File != "" {
		f, ok := l.Find(ref.File)
		if !ok {
			return nil, fmt.Errorf("hub: %s has no file %s at revision %s; %s", ref.Repo, ref.File, l.Revision, describe(l))
		}
		res.Path = filepath.Join(folder, filepath.FromSlash(f.Name))
		return res, fetch(f)
	}
	files, sharded, err := modelFiles(l)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := fetch(f); err != nil {
			return nil, err
		}
	}
	if sharded {
		shards, err := indexShards(l, filepath.Join(folder, weightsIndex))
		if err != nil {
			return nil, err
		}
		for _, f := range shards {
			if err := fetch(f); err != nil {
				return nil, err
			}
		}
	}
	if _, ok := l.Find("tokenizer.json"); !ok {
		res.Missing = append(res.Missing, "tokenizer.json")
	}
	return res, nil
}

// modelFiles returns the files of l that tfd reads first: metadataFiles where l has them, and
// model.safetensors or else the shards' index, last (sharded: Pull reads it for the shards), as
// the engine prefers them. It refuses a repo without config.json or safetensors weights, saying
// what the repo holds instead.
func modelFiles(l *Listing) (files []File, sharded bool, err error) {
	if _, ok := l.Find("config.json"); !ok {
		return nil, false, fmt.Errorf("hub: %s at revision %s has no config.json, so it is no model folder tfd reads; %s", l.Repo, l.Revision, describe(l))
	}
	for _, name := range metadataFiles {
		if f, ok := l.Find(name); ok {
			files = append(files, f)
		}
	}
	if f, ok := l.Find(singleWeights); ok {
		return append(files, f), false, nil
	}
	if f, ok := l.Find(weightsIndex); ok {
		return append(files, f), true, nil
	}
	return nil, false, fmt.Errorf("hub: %s at revision %s has neither %s nor %s: tfd reads safetensors weights; %s", l.Repo, l.Revision, singleWeights, weightsIndex, describe(l))
}

// indexShards reads the shards' index at path (fetched already) and returns the files its
// weight_map names, each of which l must list.
func indexShards(l *Listing, indexPath string) ([]File, error) {
	raw, err := os.ReadFile(indexPath)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &index); err != nil || len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("hub: %s %s has no weight_map (%v): the repo's index is broken", l.Repo, weightsIndex, err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, name := range index.WeightMap {
			if !seen[name] {
				seen[name] = true
				if !yield(name) {
					return
				}
			}
		}
	})
	var shards []File
	for _, name := range names {
		f, ok := l.Find(name)
		if !ok {
			return nil, fmt.Errorf("hub: %s %s names %s, which the repo does not hold at revision %s", l.Repo, weightsIndex, name, l.Revision)
		}
		shards = append(shards, f)
	}
	return shards, nil
}

// describe says what l holds, for an error that refuses it: its GGUF files, to pull one by name,
// else its first files.
func describe(l *Listing) string {
	var gguf, all []string
	for _, f := range l.Files {
		all = append(all, f.Name)
		if strings.HasSuffix(strings.ToLower(f.Name), ".gguf") {
			gguf = append(gguf, f.Name)
		}
	}
	if len(gguf) > 0 {
		return fmt.Sprintf("it holds GGUF files: pull one with tfd pull %s:FILE, e.g. %s:%s (%s)", l.Repo, l.Repo, gguf[0], list(gguf))
	}
	if len(all) == 0 {
		return "it holds no files"
	}
	return "it holds " + list(all)
}

// list joins names, the first 12 of them.
func list(names []string) string {
	if len(names) > 12 {
		return strings.Join(names[:12], ", ") + fmt.Sprintf(" and %d more", len(names)-12)
	}
	return strings.Join(names, ", ")
}
