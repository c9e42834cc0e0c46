// Package models holds the bundled model, embedded in the binary so that a bare `tfd serve` has
// something real to serve: gopher, a 15.7M-parameter Qwen3-architecture model with an MTP head,
// trained on the Go standard library's source by tools/train.
package models

import (
	"embed"
	"io/fs"
)

//go:embed gopher/*.json gopher/*.safetensors
var files embed.FS

// Name is the id the bundled model is served under.
const Name = "gopher"

// FS returns the bundled model's folder: config.json, the safetensors shards and their index, the
// tokenizer and generation_config.json.
func FS() fs.FS {
	sub, err := fs.Sub(files, Name)
	if err != nil {
		panic("models: the embedded folder is missing: " + err.Error()) // fixed at build time
	}
	return sub
}
