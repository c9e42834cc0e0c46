// Package hubtest is a fake Hugging Face hub for tests, served with net/http/httptest: the file
// list of a repo at a revision, resolve downloads (a plain file answered at once, an LFS file
// redirected to a CDN path, perhaps on another host), Range requests, the hub's headers and
// error codes, and faults a test switches on: a transfer cut short, bytes that do not match
// their checksum, a server that ignores Range. It records every request. It imports nothing of
// tfd's, so hub's tests and cmd/tfd's share it.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// File is one file of a fake repo.
type File struct {
	Content []byte
	// LFS stores the file in LFS: the listing gives its sha256, and resolve redirects to the CDN.
	LFS bool
}

// Request is one request the hub answered.
type Request struct {
	Host, Path    string
	Range         string // the Range header, if any
	Authorization string
	Status        int
}

// Hub is a fake hub, an http.Handler. Set its exported fields before it serves and leave them;
// the fault switches are safe to use while it serves.
type Hub struct {
	// Repos maps a repo id to its files by name. Each repo has one commit, which the revision
	// "main" names (see Commit).
	Repos map[string]map[string]File
	// Token, when set, must come with every request as a bearer token: without it the hub
	// answers 401 as the real one does for a private repo, with a wrong one 401 "Invalid
	// credentials".
	Token string
	// CDNHost is the host LFS downloads are redirected to; empty: the request's own host.
	CDNHost string
	// OmitChecksums lists files without their blob ids and LFS sha256, as a hub that gives only
	// the headers would.
	OmitChecksums bool

	mu          sync.Mutex // guards the fields below
	cut         map[string]int64
	corrupt     map[string]bool
	ignoreRange bool
	requests    []Request
}

// Commit returns the commit the fake gives repo: a hash of its id.
func Commit(repo string) string {
	sum := sha1.Sum([]byte("commit " + repo))
	return hex.EncodeToString(sum[:])
}

// BlobID returns the git blob id of content.
func BlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256 returns the hex sha256 of content.
func SHA256(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// CutNext makes the next download of file send only n bytes of its body, then break the
// connection.
func (h *Hub) CutNext(file string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut == nil {
		h.cut = map[string]int64{}
	}
	h.cut[file] = n
}

// Corrupt makes every download of file send other bytes than its checksum's (on) or its own (off).
func (h *Hub) Corrupt(file string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.corrupt == nil {
		h.corrupt = map[string]bool{}
	}
	h.corrupt[file] = on
}

// IgnoreRange makes downloads answer 200 with the whole file whatever their Range header asks.
func (h *Hub) IgnoreRange(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ignoreRange = on
}

// Requests returns the requests answered since the last call, and forgets them.
func (h *Hub) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.requests
	h.requests = nil
	return r
}

var (
	listPattern    = regexp.MustCompile(`^/api/models/(.+)/revision/([^/]+)$`)
	resolvePattern = regexp.MustCompile(`^/(.+?)/resolve/([^/]+)/(.+)$`)
	cdnPattern     = regexp.MustCompile(`^/cdn/(.+?)/([0-9a-f]{40})/(.+)$`)
)

// ServeHTTP answers the hub's API: the file list, resolve, and the CDN path LFS redirects to.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		h.mu.Lock()
		h.requests = append(h.requests, Request{Host: r.Host, Path: r.URL.Path, Range: r.Header.Get("Range"),
			Authorization: r.Header.Get("Authorization"), Status: rec.status})
		h.mu.Unlock()
	}()
	cdn := cdnPattern.FindStringSubmatch(r.URL.Path)
	if cdn == nil && !h.authorized(rec, r) {
		return
	}
	if m := listPattern.FindStringSubmatch(r.URL.Path); m != nil {
		h.list(rec, m[1], m[2])
		return
	}
	if m := resolvePattern.FindStringSubmatch(r.URL.Path); m != nil {
		h.resolve(rec, r, m[1], m[2], m[3])
		return
	}
	if cdn != nil {
		if f, ok := h.Repos[cdn[1]][cdn[3]]; ok && cdn[2] == Commit(cdn[1]) {
			h.serve(rec, r, cdn[3], f.Content)
			return
		}
	}
	http.NotFound(rec, r)
}

// authorized checks the bearer token and answers 401 when it is missing or wrong.
func (h *Hub) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.Token == "" {
		return true
	}
	switch r.Header.Get("Authorization") {
	case "Bearer " + h.Token:
		return true
	case "":
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.Header().Set("X-Error-Message", "Repository not found")
	default:
		w.Header().Set("X-Error-Message", "Invalid credentials in Authorization header")
	}
	http.Error(w, "unauthorized", http.StatusUnauthorized)
	return false
}

// repo returns the files of repo at revision, or answers 404 with the hub's error code.
func (h *Hub) repo(w http.ResponseWriter, repo, revision string) (map[string]File, bool) {
	files, ok := h.Repos[repo]
	switch {
	case !ok:
		w.Header().Set("X-Error-Code", "RepoNotFound")
	case revision != "main" && revision != Commit(repo):
		w.Header().Set("X-Error-Code", "RevisionNotFound")
	default:
		return files, true
	}
	http.Error(w, "not found", http.StatusNotFound)
	return nil, false
}

// list answers the file list of repo at revision, with sizes and checksums.
func (h *Hub) list(w http.ResponseWriter, repo, revision string) {
	files, ok := h.repo(w, repo, revision)
	if !ok {
		return
	}
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		Name   string `json:"rfilename"`
		Size   int    `json:"size"`
		BlobID string `json:"blobId,omitempty"`
		LFS    *lfs   `json:"lfs,omitempty"`
	}
	info := struct {
		ID       string    `json:"id"`
		SHA      string    `json:"sha"`
		Siblings []sibling `json:"siblings"`
	}{ID: repo, SHA: Commit(repo), Siblings: []sibling{}}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f := files[name]
		s := sibling{Name: name, Size: len(f.Content), BlobID: BlobID(f.Content)}
		if f.LFS {
			pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", SHA256(f.Content), len(f.Content))
			s.BlobID = BlobID([]byte(pointer))
			s.LFS = &lfs{SHA256: SHA256(f.Content), Size: len(f.Content), PointerSize: len(pointer)}
		}
		if h.OmitChecksums {
			s.BlobID, s.LFS = "", nil
		}
		info.Siblings = append(info.Siblings, s)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(info)
}

// resolve answers a download: a plain file at once with its blob id as ETag, an LFS file with a
// redirect to the CDN carrying its sha256 as X-Linked-Etag.
func (h *Hub) resolve(w http.ResponseWriter, r *http.Request, repo, revision, name string) {
	files, ok := h.repo(w, repo, revision)
	if !ok {
		return
	}
	f, ok := files[name]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", Commit(repo))
	if !f.LFS {
		w.Header().Set("ETag", `"`+BlobID(f.Content)+`"`)
		h.serve(w, r, name, f.Content)
		return
	}
	w.Header().Set("X-Linked-Etag", `"`+SHA256(f.Content)+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Content)))
	host := r.Host
	if h.CDNHost != "" {
		host = h.CDNHost
	}
	http.Redirect(w, r, fmt.Sprintf("http://%s/cdn/%s/%s/%s", host, repo, Commit(repo), name), http.StatusFound)
}

// serve sends content, or the part a "bytes=N-" Range asks for, applying the faults.
func (h *Hub) serve(w http.ResponseWriter, r *http.Request, name string, content []byte) {
	h.mu.Lock()
	cut, cutting := h.cut[name]
	delete(h.cut, name)
	corrupt, ignoreRange := h.corrupt[name], h.ignoreRange
	h.mu.Unlock()
	if corrupt {
		content = slices.Clone(content)
		content[len(content)/2] ^= 0xff
	}
	from := 0
	if spec, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok && !ignoreRange {
		n, err := strconv.Atoi(strings.TrimSuffix(spec, "-"))
		if err != nil || !strings.HasSuffix(spec, "-") {
			http.Error(w, "only bytes=N- ranges", http.StatusBadRequest)
			return
		}
		if n >= len(content) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(content)))
			http.Error(w, "range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		from = n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(content)-1, len(content)))
	}
	body := content[from:]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Content-Type", "application/octet-stream")
	if from > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	if cutting && cut < int64(len(body)) {
		w.Write(body[:cut])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the connection closes with the body short of its length
	}
	w.Write(body)
}

// recorder keeps the status a handler answered, for the request log.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// Unwrap gives http.ResponseController the writer beneath, so Flush reaches the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
