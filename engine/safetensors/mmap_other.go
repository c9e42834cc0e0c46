//go:build !(linux || darwin)

package safetensors

import (
	"fmt"
	"os"
)

// mapFile reads the whole file: platforms other than linux and darwin get no memory mapping, which
// costs resident memory for the whole checkpoint but keeps the package portable.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	return data, func() error { return nil }, nil
}
