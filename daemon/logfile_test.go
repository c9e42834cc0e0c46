package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLogFileFollowsRotation: after newsyslog moves the log aside (and makes a new one, or not),
// the next line goes to the file at the log's path, not into the moved one.
func TestLogFileFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tfd.log")
	l, err := OpenLogFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write([]byte("one\n"))
	os.Rename(path, path+".0") // newsyslog: move aside, then make a new file
	os.WriteFile(path, []byte("turned over\n"), 0o640)
	l.Write([]byte("two\n"))
	os.Rename(path, path+".1") // a rotation that leaves no file behind
	l.Write([]byte("three\n"))
	for file, want := range map[string]string{path + ".0": "one\n", path + ".1": "turned over\ntwo\n", path: "three\n"} {
		if got, err := os.ReadFile(file); err != nil || string(got) != want {
			t.Errorf("%s holds %q (%v), want %q", file, got, err, want)
		}
	}
	if info, err := os.Stat(path); err != nil {
		t.Error(err)
	} else if info.Mode().Perm()&0o027 != 0 {
		t.Errorf("the new log's mode is %v: the group may write, or others read", info.Mode())
	}
}
