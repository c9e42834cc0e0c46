package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"tfd/hub/hubtest"
)

// The fake repos: a sharded model folder with files tfd must skip, and a GGUF repo.
const (
	modelRepo = "acme/tiny"
	ggufRepo  = "acme/tiny-GGUF"
	shard1    = "model-00001-of-00002.safetensors"
	shard2    = "model-00002-of-00002.safetensors"
)

// fill returns n bytes that differ from file to file and position to position.
func fill(seed string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s %d", seed, i))
		b.Write(sum[:])
	}
	return b.Bytes()[:n]
}

// testRepos returns the fake repos, made once: the hub only reads them.
var testRepos = sync.OnceValue(func() map[string]map[string]hubtest.File {
	index, _ := json.Marshal(map[string]any{"weight_map": map[string]string{
		"embed.weight": shard1, "layers.0.weight": shard1, "lm_head.weight": shard2,
	}})
	plain := func(b []byte) hubtest.File { return hubtest.File{Content: b} }
	lfs := func(b []byte) hubtest.File { return hubtest.File{Content: b, LFS: true} }
	return map[string]map[string]hubtest.File{
		modelRepo: {
			"config.json":                  plain([]byte(`{"model_type":"qwen3"}`)),
			"generation_config.json":       plain([]byte(`{"do_sample":false}`)),
			"tokenizer.json":               lfs(fill("tokenizer", 70_000)),
			"tokenizer_config.json":        plain([]byte(`{"chat_template":"{{ messages }}"}`)),
			"chat_template.jinja":          plain([]byte(`{{ messages }}`)),
			"model.safetensors.index.json": plain(index),
			shard1:                         lfs(fill(shard1, 3<<20+123)),
			shard2:                         lfs(fill(shard2, 1<<20+7)),
			// What tfd does not read, and so must not fetch.
			"consolidated.safetensors": lfs(fill("consolidated", 4096)),
			"pytorch_model.bin":        lfs(fill("bin", 4096)),
			"tf_model.h5":              lfs(fill("h5", 4096)),
			"onnx/model.onnx":          lfs(fill("onnx", 4096)),
			"README.md":                plain([]byte("# tiny\n")),
			"assets/logo.png":          lfs(fill("logo", 4096)),
			"special_tokens_map.json":  plain([]byte(`{}`)),
		},
		ggufRepo: {
			"tiny-Q8_0.gguf": lfs(fill("q8", 2<<20)),
			"tiny-Q4_0.gguf": lfs(fill("q4", 1<<20)),
			"README.md":      plain([]byte("# tiny GGUF\n")),
		},
	}
})

// modelFolderFiles are the files a pull of modelRepo fetches, in order.
var modelFolderFiles = []string{
	"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"chat_template.jinja", "model.safetensors.index.json", shard1, shard2,
}

// newHub serves a fake hub with the test repos and returns it with a client of it and a models
// folder.
func newHub(t *testing.T, configure func(*hubtest.Hub)) (*hubtest.Hub, *Client, string) {
	t.Helper()
	h := &hubtest.Hub{Repos: testRepos()}
	if configure != nil {
		configure(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, &Client{Endpoint: srv.URL, Token: h.Token}, t.TempDir()
}

// content returns a test repo's file.
func content(repo, name string) []byte { return testRepos()[repo][name].Content }

// tree returns the files under dir, slash-separated.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	slices.Sort(files)
	return files
}

// checkFile fails unless path holds the test repo's file.
func checkFile(t *testing.T, path, repo, name string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, content(repo, name)) {
		t.Errorf("%s: %d bytes (%v), want the %d bytes of %s", path, len(got), err, len(content(repo, name)), name)
	}
}

// downloads returns the paths of h's requests that transferred a file's bytes (the CDN, or a
// resolve answered at once), with their Range headers.
func downloads(h *hubtest.Hub) []string {
	var out []string
	for _, r := range h.Requests() {
		if strings.HasPrefix(r.Path, "/cdn/") || (strings.Contains(r.Path, "/resolve/") && r.Status != http.StatusFound) {
			out = append(out, fmt.Sprintf("%s %s %d", r.Path[strings.LastIndex(r.Path, "/")+1:], r.Range, r.Status))
		}
	}
	return out
}

// TestPullModelFolder pulls a sharded model folder through a hub on one host whose LFS files
// come from a CDN on another: exactly the files tfd reads arrive, verified, the token goes to the
// hub and never to the CDN, and a second pull finds everything in place and fetches nothing.
func TestPullModelFolder(t *testing.T) {
	h := &hubtest.Hub{Repos: testRepos(), Token: "hf_secret", CDNHost: "cdn-lfs.hub.test"}
	srv := httptest.NewServer(h)
	defer srv.Close()
	// Every host name reaches the test server, so the hub and its CDN are two hosts.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	c := &Client{Endpoint: "http://hub.test/", Token: "hf_secret", HTTP: &http.Client{Transport: &http.Transport{DialContext: dial}}}
	dir := t.TempDir()

	var p recordProgress
	res, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, &p)
	if err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "acme", "tiny")
	if res.Path != folder || res.Commit != hubtest.Commit(modelRepo) {
		t.Errorf("result path %s commit %s, want %s and %s", res.Path, res.Commit, folder, hubtest.Commit(modelRepo))
	}
	if got := tree(t, folder); !slices.Equal(got, slices.Sorted(slices.Values(modelFolderFiles))) {
		t.Errorf("the folder holds %q, want %q", got, modelFolderFiles)
	}
	for i, f := range res.Files {
		if f.Name != modelFolderFiles[i] || !f.Fetched || f.Size != int64(len(content(modelRepo, f.Name))) {
			t.Errorf("result file %d = %+v, want %s fetched, %d bytes", i, f, modelFolderFiles[i], len(content(modelRepo, f.Name)))
		}
		checkFile(t, filepath.Join(folder, f.Name), modelRepo, f.Name)
	}
	if len(res.Missing) != 0 {
		t.Errorf("missing %q, want none", res.Missing)
	}
	cdn := 0
	for _, r := range h.Requests() {
		onCDN := r.Host == "cdn-lfs.hub.test"
		if onCDN {
			cdn++
		}
		if onCDN == (r.Authorization != "") {
			t.Errorf("%s%s: Authorization %q: the token must go to the hub and never to the CDN", r.Host, r.Path, r.Authorization)
		}
	}
	if cdn != 3 { // tokenizer.json and the two shards are in LFS
		t.Errorf("%d downloads from the CDN, want 3", cdn)
	}
	if want := "start config.json 0/22; finish config.json <nil>"; !strings.HasPrefix(p.String(), want) {
		t.Errorf("progress starts %q, want %q", p.String(), want)
	}

	p = recordProgress{}
	res, err = c.Pull(context.Background(), Ref{Repo: modelRepo}, "main", dir, &p)
	if err != nil {
		t.Fatal(err)
	}
	if got := downloads(h); len(got) != 0 {
		t.Errorf("a second pull downloaded %q, want nothing", got)
	}
	for _, f := range res.Files {
		if f.Fetched {
			t.Errorf("%s fetched again", f.Name)
		}
	}
	if !strings.HasPrefix(p.String(), "present config.json 22;") {
		t.Errorf("second pull's progress %q, want every file present", p.String())
	}
}

// TestPullOneFile fetches one file of a GGUF repo, and nothing else.
func TestPullOneFile(t *testing.T) {
	h, c, dir := newHub(t, nil)
	res, err := c.Pull(context.Background(), Ref{Repo: ggufRepo, File: "tiny-Q4_0.gguf"}, "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "acme", "tiny-GGUF", "tiny-Q4_0.gguf")
	if res.Path != want || len(res.Files) != 1 {
		t.Errorf("result %+v, want path %s and one file", res, want)
	}
	checkFile(t, want, ggufRepo, "tiny-Q4_0.gguf")
	if got := tree(t, dir); !slices.Equal(got, []string{"acme/tiny-GGUF/tiny-Q4_0.gguf"}) {
		t.Errorf("the models folder holds %q", got)
	}
	if got := downloads(h); !slices.Equal(got, []string{"tiny-Q4_0.gguf  200"}) {
		t.Errorf("downloads %q", got)
	}
}

// TestResume continues a .part that holds the first half of a shard with a Range request for the
// rest.
func TestResume(t *testing.T) {
	h, c, dir := newHub(t, nil)
	whole := content(modelRepo, shard1)
	dest := filepath.Join(dir, "acme", "tiny", shard1)
	os.MkdirAll(filepath.Dir(dest), 0o755)
	os.WriteFile(dest+PartSuffix, whole[:len(whole)/2], 0o644)
	var p recordProgress
	if _, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, &p); err != nil {
		t.Fatal(err)
	}
	checkFile(t, dest, modelRepo, shard1)
	want := fmt.Sprintf("%s bytes=%d- 206", shard1, len(whole)/2)
	if got := downloads(h); !slices.Contains(got, want) {
		t.Errorf("downloads %q, want %q among them", got, want)
	}
	if start := fmt.Sprintf("start %s %d/%d;", shard1, len(whole)/2, len(whole)); !strings.Contains(p.String(), start) {
		t.Errorf("progress %q, want %q", p.String(), start)
	}
	if _, err := os.Stat(dest + PartSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the .part is left: %v", err)
	}
}

// TestIgnoredRange: a server that answers a Range request with the whole file (200) has its
// answer written from the start, not appended to the .part.
func TestIgnoredRange(t *testing.T) {
	h, c, dir := newHub(t, nil)
	h.IgnoreRange(true)
	whole := content(modelRepo, shard2)
	dest := filepath.Join(dir, "acme", "tiny", shard2)
	os.MkdirAll(filepath.Dir(dest), 0o755)
	os.WriteFile(dest+PartSuffix, whole[:1000], 0o644)
	if _, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, nil); err != nil {
		t.Fatal(err)
	}
	checkFile(t, dest, modelRepo, shard2)
	if got := downloads(h); !slices.Contains(got, shard2+" bytes=1000- 200") {
		t.Errorf("downloads %q, want a range request answered 200", got)
	}
}

// TestTruncated: a transfer the server cuts short fails naming the file, keeps what arrived in
// the .part, and the next pull continues it to the end.
func TestTruncated(t *testing.T) {
	h, c, dir := newHub(t, nil)
	h.CutNext(shard1, 1<<20)
	dest := filepath.Join(dir, "acme", "tiny", shard1)
	_, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, nil)
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "acme/tiny "+shard1) ||
		!strings.Contains(err.Error(), "run the pull again to resume") {
		t.Fatalf("error %v, want an incomplete transfer of %s that says how to resume", err, shard1)
	}
	if info, err := os.Stat(dest + PartSuffix); err != nil || info.Size() != 1<<20 {
		t.Fatalf("the .part: %v, %v; want the 1 MiB that arrived", info, err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the incomplete file was put in place: %v", err)
	}
	h.Requests()
	if _, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, nil); err != nil {
		t.Fatal(err)
	}
	checkFile(t, dest, modelRepo, shard1)
	if got := downloads(h); !slices.Contains(got, fmt.Sprintf("%s bytes=%d- 206", shard1, 1<<20)) {
		t.Errorf("the retry's downloads %q, want the shard continued from 1 MiB", got)
	}
}

// TestChecksum: a file whose bytes do not hash to what the hub says is not put in place and its
// download is removed; the checksum comes from the listing (sha256 for LFS, the git blob id
// otherwise) or, where the listing has none, from the ETag headers.
func TestChecksum(t *testing.T) {
	for _, headersOnly := range []bool{false, true} {
		for _, name := range []string{shard2, "config.json"} {
			t.Run(fmt.Sprintf("%s/headers-only=%v", name, headersOnly), func(t *testing.T) {
				h, c, dir := newHub(t, func(h *hubtest.Hub) { h.OmitChecksums = headersOnly })
				h.Corrupt(name, true)
				dest := filepath.Join(dir, "acme", "tiny", name)
				_, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, nil)
				kind := map[string]string{shard2: "sha256", "config.json": "git blob"}[name]
				if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "acme/tiny "+name) || !strings.Contains(err.Error(), kind) {
					t.Fatalf("error %v, want a %s checksum mismatch naming %s", err, kind, name)
				}
				for _, path := range []string{dest, dest + PartSuffix} {
					if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s is there after a checksum mismatch: %v", path, err)
					}
				}
				h.Corrupt(name, false)
				if _, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, nil); err != nil {
					t.Fatal(err)
				}
				checkFile(t, dest, modelRepo, name)
			})
		}
	}
}

// TestWholePart: a .part as long as the file (a pull stopped before its rename) is verified and
// put in place without a transfer; one that does not verify is downloaded again.
func TestWholePart(t *testing.T) {
	for _, good := range []bool{true, false} {
		h, c, dir := newHub(t, nil)
		dest := filepath.Join(dir, "acme", "tiny", shard2)
		part := slices.Clone(content(modelRepo, shard2))
		if !good {
			part[0] ^= 1
		}
		os.MkdirAll(filepath.Dir(dest), 0o755)
		os.WriteFile(dest+PartSuffix, part, 0o644)
		if _, err := c.Pull(context.Background(), Ref{Repo: modelRepo}, "", dir, nil); err != nil {
			t.Fatal(err)
		}
		checkFile(t, dest, modelRepo, shard2)
		fetched := slices.ContainsFunc(downloads(h), func(d string) bool { return strings.HasPrefix(d, shard2) })
		if fetched == good {
			t.Errorf("a whole .part that verifies=%v: fetched again=%v", good, fetched)
		}
	}
}

// TestInterrupted: a pull cancelled mid-transfer keeps the .part and says so; errors.Is finds
// the context's error.
func TestInterrupted(t *testing.T) {
	_, c, dir := newHub(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &recordProgress{onUpdate: func(name string, have int64) {
		if name == shard1 {
			cancel()
		}
	}}
	_, err := c.Pull(ctx, Ref{Repo: modelRepo}, "", dir, p)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want an interrupted transfer", err)
	}
	info, err := os.Stat(filepath.Join(dir, "acme", "tiny", shard1+PartSuffix))
	if err != nil || info.Size() == 0 {
		t.Errorf("the .part: %v, %v; want what arrived kept", info, err)
	}
}

// TestAccessErrors: the hub's refusals become errors that say what to do: a token for a repo
// that needs one, a name or revision to check.
func TestAccessErrors(t *testing.T) {
	tests := []struct {
		name       string
		hubToken   string // the token the hub wants
		token      string // the token the client sends
		ref        Ref
		revision   string
		want       []string
		notPresent bool
	}{
		{name: "no token", hubToken: "hf_right", ref: Ref{Repo: modelRepo},
			want: []string{"401", "HF_TOKEN", "/acme/tiny", "settings/tokens", "check the name"}},
		{name: "wrong token", hubToken: "hf_right", token: "hf_wrong", ref: Ref{Repo: modelRepo},
			want: []string{"401", "Invalid credentials", "refused HF_TOKEN"}},
		{name: "no such repo", ref: Ref{Repo: "acme/nothing"},
			want: []string{"404", "acme/nothing at revision main", "check the repo's name"}},
		{name: "no such revision", ref: Ref{Repo: modelRepo}, revision: "v9",
			want: []string{"404", `acme/tiny has no revision "v9"`, "check the revision"}},
		{name: "no such file", ref: Ref{Repo: ggufRepo, File: "tiny-Q2_K.gguf"},
			want: []string{"acme/tiny-GGUF has no file tiny-Q2_K.gguf at revision main", "tiny-Q4_0.gguf, tiny-Q8_0.gguf"}},
		{name: "not a model folder", ref: Ref{Repo: ggufRepo},
			want: []string{"no config.json", "tfd pull acme/tiny-GGUF:FILE", "e.g. acme/tiny-GGUF:tiny-Q4_0.gguf"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, c, dir := newHub(t, func(h *hubtest.Hub) { h.Token = tc.hubToken })
			c.Token = tc.token
			_, err := c.Pull(context.Background(), tc.ref, tc.revision, dir, nil)
			if err == nil {
				t.Fatal("pull succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if got := tree(t, dir); len(got) != 0 {
				t.Errorf("the models folder holds %q after a refusal", got)
			}
		})
	}
}

// TestFetchMissingEntry: a resolve the hub answers 404 EntryNotFound names the file.
func TestFetchMissingEntry(t *testing.T) {
	_, c, dir := newHub(t, nil)
	l, err := c.List(context.Background(), modelRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fetch(context.Background(), l, File{Name: "gone.json", Size: -1}, filepath.Join(dir, "gone.json"), nil)
	if err == nil || !strings.Contains(err.Error(), "acme/tiny has no file gone.json (404 Not Found)") || !strings.Contains(err.Error(), "check the file's name") {
		t.Errorf("error %v", err)
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
		err  string
	}{
		{in: "Qwen/Qwen3-0.6B", want: Ref{Repo: "Qwen/Qwen3-0.6B"}},
		{in: "gpt2", want: Ref{Repo: "gpt2"}},
		{in: "unsloth/Qwen3-0.6B-GGUF:Qwen3-0.6B-Q8_0.gguf", want: Ref{Repo: "unsloth/Qwen3-0.6B-GGUF", File: "Qwen3-0.6B-Q8_0.gguf"}},
		{in: "a/b:sub/dir/x.gguf", want: Ref{Repo: "a/b", File: "sub/dir/x.gguf"}},
		{in: "a/b:", err: "names no file after the colon"},
		{in: "a/b:../../etc/passwd", err: "not a file path inside a repo"},
		{in: "a/b:/etc/passwd", err: "not a file path inside a repo"},
		{in: "a/b/c", err: "not a repo id"},
		{in: "../b", err: "not a repo id"},
		{in: "", err: "not a repo id"},
	}
	for _, tc := range tests {
		got, err := ParseRef(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRef(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || got.String() != tc.in {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// recordProgress writes what it hears as "event name figures;" entries.
type recordProgress struct {
	b        strings.Builder
	onUpdate func(name string, have int64)
}

func (p *recordProgress) Present(name string, size int64) {
	fmt.Fprintf(&p.b, "present %s %d; ", name, size)
}
func (p *recordProgress) Start(name string, have, size int64) {
	fmt.Fprintf(&p.b, "start %s %d/%d; ", name, have, size)
}
func (p *recordProgress) Update(name string, have int64) {
	if p.onUpdate != nil {
		p.onUpdate(name, have)
	}
}
func (p *recordProgress) Finish(name string, err error) {
	fmt.Fprintf(&p.b, "finish %s %v; ", name, err)
}
func (p *recordProgress) String() string { return p.b.String() }

// TestStall: a request that receives nothing for the StallTimeout is given up, before its
// answer or in its body, and the bytes that arrived stay in the .part. On synctest's clock.
func TestStall(t *testing.T) {
	for _, sent := range []int{-1, 0, 10} { // -1: no answer at all
		synctest.Test(t, func(t *testing.T) {
			c := &Client{Endpoint: "http://hub.test", StallTimeout: time.Minute, HTTP: &http.Client{Transport: stallingTransport{sent}}}
			l := &Listing{Repo: "acme/x", Revision: "main", Commit: strings.Repeat("a", 40)}
			dest := filepath.Join(t.TempDir(), "w.safetensors")
			start := time.Now()
			_, err := c.Fetch(context.Background(), l, File{Name: "w.safetensors", Size: 100}, dest, nil)
			if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "acme/x w.safetensors") {
				t.Fatalf("sent %d: error %v, want a stall naming the file", sent, err)
			}
			// Each byte that arrives starts the wait again.
			if waited, want := time.Since(start), time.Duration(max(sent, 0))*trickle+time.Minute; waited != want {
				t.Errorf("sent %d: given up after %s, want %s", sent, waited, want)
			}
			if info, err := os.Stat(dest + PartSuffix); sent >= 0 && (err != nil || info.Size() != int64(sent)) {
				t.Errorf("sent %d: the .part: %v %v", sent, info, err)
			}
		})
	}
}

// stallingTransport answers 200 for a 100-byte file, sends sent bytes of it, one every trickle,
// and then nothing until the request is cancelled; sent -1 sends no answer at all.
type stallingTransport struct{ sent int }

// trickle is how long stallingTransport takes for each byte it sends: less than the stall
// timeout, so each byte keeps the transfer alive.
const trickle = 30 * time.Second

func (s stallingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.sent < 0 {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	body := &stallingBody{ctx: req.Context(), first: make([]byte, s.sent)}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", ContentLength: 100, Header: http.Header{},
		Body: body, Request: req}, nil
}

type stallingBody struct {
	ctx   context.Context
	first []byte
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		time.Sleep(trickle) // on synctest's clock
		n := copy(p, b.first[:1])
		b.first = b.first[n:]
		return n, nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *stallingBody) Close() error { return nil }
