package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ReadAPIKeys reads a keys file: one key a line; blank lines and lines starting with # are
// skipped. A file without keys is an error, since it would lock every client out.
func ReadAPIKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("daemon: server.api_keys_file: %w", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("daemon: read server.api_keys_file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, errors.New("daemon: server.api_keys_file " + path + " holds no keys: add one key a line, or set api_keys_file to \"\" for no authentication")
	}
	return keys, nil
}
