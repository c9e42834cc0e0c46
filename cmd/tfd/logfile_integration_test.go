package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeLogFile runs tfd serve --log-file as the LaunchDaemon does, moves the log aside as
// newsyslog does, and checks that the next lines, the last words at SIGINT among them, go to a
// new file at the log's path, and that nothing goes to the standard output and error launchd
// opened, which the log now takes over.
func TestServeLogFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tfd and serves the bundled model; skipped with -short")
	}
	log := filepath.Join(t.TempDir(), "tfd.log")
	srv := startServer(t, "", "--log-file", log)
	if err := os.Rename(log, log+".0"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + srv.addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.stop(t)
	before, _ := os.ReadFile(log + ".0")
	after, _ := os.ReadFile(log)
	if !strings.Contains(string(before), "msg=starting") || strings.Contains(string(before), "/v1/models") {
		t.Errorf("the moved log holds:\n%s", before)
	}
	if !strings.Contains(string(after), "path=/v1/models") || !strings.Contains(string(after), "msg=stopped") {
		t.Errorf("the new log holds:\n%s", after)
	}
	if out := srv.log.String(); out != "" {
		t.Errorf("tfd wrote to its standard output or error:\n%s", out)
	}
}
