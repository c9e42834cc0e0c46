package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadAPIKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	os.WriteFile(path, []byte("# clients\nsk-one\n\n  sk-two  \n"), 0o600)
	keys, err := ReadAPIKeys(path)
	if err != nil || !reflect.DeepEqual(keys, []string{"sk-one", "sk-two"}) {
		t.Errorf("keys %q, %v", keys, err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# none yet\n"), 0o600)
	if _, err := ReadAPIKeys(empty); err == nil || !strings.Contains(err.Error(), "holds no keys") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := ReadAPIKeys(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "server.api_keys_file") {
		t.Errorf("missing file: %v", err)
	}
}
