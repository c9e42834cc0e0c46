// Package hub fetches model files from the Hugging Face hub over its HTTP API, for `tfd pull`. It
// owns the listing of a repo's files at a revision, the choice of the files tfd needs from it,
// and resumable, verified downloads into a models folder. It imports nothing of tfd's.
//
// The hub's API, as huggingface_hub uses it:
//   - GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true answers JSON with the commit
//     the revision names ("sha") and the files ("siblings"), each with its "size", its git blob
//     id ("blobId") and, for a file stored in LFS, "lfs": {"sha256", "size"}.
//   - GET {endpoint}/{repo}/resolve/{commit}/{file} answers the file, or for an LFS file redirects
//     to a CDN; the hub's own answer carries X-Repo-Commit, and ETag (a plain file's git blob id)
//     or X-Linked-Etag (an LFS file's sha256). Range requests resume a transfer.
//   - Errors carry X-Error-Code: RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo. The hub
//     answers 401, not 404, for a repo that does not exist when the request has no token, so as
//     not to tell a private repo from a missing one.
//
// Every file is written to NAME.part first and renamed into place only when whole and verified:
// against the LFS sha256, else the git blob id, else an ETag that is a content hash, else the
// size. An interrupted transfer leaves the .part, and the next Fetch continues it.
package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// DefaultEndpoint is the hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// DefaultRevision is the revision a pull takes when none is named: the repo's main branch.
const DefaultRevision = "main"

// DefaultStallTimeout is how long a request may go without receiving a byte before it is given
// up; see [Client.StallTimeout].
const DefaultStallTimeout = 60 * time.Second

// Client talks to one hub. Its fields are read, never changed, by its methods, which are safe for
// concurrent use as long as two of them do not write the same file.
type Client struct {
	// Endpoint is the hub's address, e.g. https://huggingface.co (HF_ENDPOINT); empty: the
	// DefaultEndpoint.
	Endpoint string
	// Token is an access token sent as a bearer token to the endpoint's host, never to the CDN
	// it redirects to (HF_TOKEN); empty: anonymous.
	Token string
	// HTTP sends the requests; nil: http.DefaultClient. Its CheckRedirect is replaced per request.
	HTTP *http.Client
	// StallTimeout gives up a request that receives nothing for this long (the .part stays);
	// 0: DefaultStallTimeout. There is no limit on a transfer's whole time.
	StallTimeout time.Duration
}

// FromEnv returns a Client for the hub that the environment names, as huggingface_hub reads it:
// HF_ENDPOINT (default https://huggingface.co) and HF_TOKEN.
func FromEnv(getenv func(string) string) *Client {
	return &Client{Endpoint: getenv("HF_ENDPOINT"), Token: getenv("HF_TOKEN")}
}

// endpoint returns the hub's address without a trailing slash.
func (c *Client) endpoint() string {
	return strings.TrimRight(cmp.Or(c.Endpoint, DefaultEndpoint), "/")
}

// A File is one file of a repo at a commit, as the hub lists it.
type File struct {
	// Name is the file's path in the repo, slash-separated.
	Name string
	// Size is its length in bytes; -1 when the hub did not say.
	Size int64
	// SHA256 is the hex sha256 of its content, for a file stored in LFS; empty otherwise.
	SHA256 string
	// BlobID is its git blob id (hex sha1 of "blob SIZE\x00" and the content) for a file kept in
	// git itself; empty for an LFS file (whose blob is its pointer) or when the hub did not say.
	BlobID string
}

// A Listing is a repo's files at one commit.
type Listing struct {
	Repo     string
	Revision string // as asked: a branch, tag or commit
	Commit   string // the 40-hex commit the revision named when listed; downloads ask for it
	Files    []File
}

// Find returns the file named name, or false.
func (l *Listing) Find(name string) (File, bool) {
	for _, f := range l.Files {
		if f.Name == name {
			return f, true
		}
	}
	return File{}, false
}

// repoPattern is a repo id: a name, or owner/name (the hub's own rule, loosely: letters, digits,
// '-', '_' and '.').
var repoPattern = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$`)

// CheckRepo reports whether repo is a well-formed repo id, naming the form it wants if not.
func CheckRepo(repo string) error {
	if !repoPattern.MatchString(repo) || strings.Contains(repo, "..") {
		return fmt.Errorf("hub: %q is not a repo id: want owner/name as in the repo's address, e.g. Qwen/Qwen3-0.6B", repo)
	}
	return nil
}

// commitPattern is a full git commit id.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// sibling is one entry of the listing's "siblings".
type sibling struct {
	Name   string `json:"rfilename"`
	Size   *int64 `json:"size"`
	BlobID string `json:"blobId"`
	LFS    *struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	} `json:"lfs"`
}

// List returns repo's files at revision (a branch, tag or commit; empty: main), with their sizes
// and checksums.
func (c *Client) List(ctx context.Context, repo, revision string) (*Listing, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	revision = cmp.Or(revision, DefaultRevision)
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", c.endpoint(), repo, url.PathEscape(revision))
	target := target{repo: repo, revision: revision}
	resp, _, err := c.get(ctx, u, nil, target)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info struct {
		SHA      string    `json:"sha"`
		Siblings []sibling `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("hub: read the file list of %s: %w", target, err)
	}
	if !commitPattern.MatchString(info.SHA) {
		return nil, fmt.Errorf("hub: the file list of %s names no commit (sha %q): is %s a Hugging Face hub?", target, info.SHA, c.endpoint())
	}
	l := &Listing{Repo: repo, Revision: revision, Commit: info.SHA}
	for _, s := range info.Siblings {
		f := File{Name: s.Name, Size: -1, BlobID: strings.ToLower(s.BlobID)}
		if s.Size != nil {
			f.Size = *s.Size
		}
		if s.LFS != nil {
			f.SHA256, f.Size, f.BlobID = strings.ToLower(s.LFS.SHA256), s.LFS.Size, ""
		}
		l.Files = append(l.Files, f)
	}
	return l, nil
}

// target names what a request fetches, for its errors: a repo at a revision, or a file of it.
type target struct {
	repo, revision, file string
}

func (t target) String() string {
	if t.file != "" {
		return t.repo + " " + t.file
	}
	return t.repo + " at revision " + t.revision
}

// get sends a GET for u with the extra headers, following redirects (the token goes only to the
// endpoint's host), and returns the response if its status is 2xx, with the headers of the
// hub's own answer (the first, before any redirect). Any other status becomes an error that says
// what to do. The response's body is read under the stall timeout.
func (c *Client) get(ctx context.Context, u string, header http.Header, t target) (*http.Response, http.Header, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel(nil)
		return nil, nil, fmt.Errorf("hub: %s: %w", t, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	// The file's own bytes: no transparent decompression, so that lengths and ranges count them.
	req.Header.Set("Accept-Encoding", "identity")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := *cmp.Or(c.HTTP, http.DefaultClient)
	var first http.Header
	hc.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if first == nil {
			first = next.Response.Header
		}
		if next.URL.Host != req.URL.Host {
			// A CDN's signed address carries its own authorization; the token is the hub's.
			next.Header.Del("Authorization")
		}
		return nil
	}
	stall := cmp.Or(c.StallTimeout, DefaultStallTimeout)
	watch := newStallWatch(stall, cancel)
	resp, err := hc.Do(req)
	if err != nil {
		watch.stop()
		err = networkError(ctx, t, err, stall)
		cancel(nil)
		return nil, nil, err
	}
	if first == nil {
		first = resp.Header
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		watch.stop()
		cancel(nil)
		return nil, nil, c.statusError(resp, t)
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, watch: watch, ctx: ctx, cancel: cancel, stall: stall}
	return resp, first, nil
}

// errStalled is the cause a stalled request is cancelled with.
var errStalled = errors.New("stalled")

// networkError wraps err, the failure of a request for t under ctx, with what was being fetched.
func networkError(ctx context.Context, t target, err error, stall time.Duration) error {
	switch {
	case errors.Is(context.Cause(ctx), errStalled):
		return fmt.Errorf("hub: %s: nothing arrived for %s: %w", t, stall, ErrStalled)
	case ctx.Err() != nil:
		return fmt.Errorf("hub: %s: interrupted: %w", t, ctx.Err())
	}
	return fmt.Errorf("hub: fetch %s: %w", t, err)
}

// ErrStalled is returned, wrapped, when a request receives nothing for the Client's
// StallTimeout; errors.Is finds it.
var ErrStalled = errors.New("the connection stalled")

// stallWatch cancels a request that receives nothing for its timeout: every read that returns
// bytes starts the wait again.
type stallWatch struct {
	timer   *time.Timer
	timeout time.Duration
}

func newStallWatch(timeout time.Duration, cancel context.CancelCauseFunc) *stallWatch {
	return &stallWatch{timer: time.AfterFunc(timeout, func() { cancel(errStalled) }), timeout: timeout}
}

func (w *stallWatch) alive() { w.timer.Reset(w.timeout) }
func (w *stallWatch) stop()  { w.timer.Stop() }

// watchedBody is a response body read under a stallWatch.
type watchedBody struct {
	io.ReadCloser
	watch  *stallWatch
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  time.Duration
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.watch.alive()
	}
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.ctx), errStalled) {
		err = fmt.Errorf("%w: nothing arrived for %s", ErrStalled, b.stall)
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.watch.stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// statusError turns a hub's answer other than 2xx into an error that says what to do.
func (c *Client) statusError(resp *http.Response, t target) error {
	page := c.endpoint() + "/" + t.repo
	code := resp.Header.Get("X-Error-Code")
	status := resp.Status
	if msg := resp.Header.Get("X-Error-Message"); msg != "" {
		status += ": " + msg
	}
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("hub: %s: %s: %w", t, status, errStartOver)
	case code == "GatedRepo":
		return fmt.Errorf("hub: %s is gated (%s): accept its terms at %s, then set HF_TOKEN to an access token of that account (%s/settings/tokens)",
			t.repo, status, page, c.endpoint())
	case resp.StatusCode == http.StatusUnauthorized && c.Token == "":
		return fmt.Errorf("hub: %s: %s: the repo does not exist, or it is private or gated: check the name; for a private or gated repo, set HF_TOKEN to an access token (%s/settings/tokens) of an account that can read %s",
			t, status, c.endpoint(), page)
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("hub: %s: %s: the hub refused HF_TOKEN, or the repo does not exist: check the name, and that the token is valid and can read %s",
			t, status, page)
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("hub: %s: %s: HF_TOKEN may not read this repo: ask for access at %s, or use a token that has it", t, status, page)
	case code == "RevisionNotFound":
		return fmt.Errorf("hub: %s has no revision %q (%s): check the revision (a branch, tag or commit of %s)", t.repo, t.revision, status, page)
	case code == "EntryNotFound" || (resp.StatusCode == http.StatusNotFound && t.file != ""):
		return fmt.Errorf("hub: %s has no file %s (%s): check the file's name at %s/tree/%s", t.repo, t.file, status, page, t.revision)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("hub: %s: %s: check the repo's name (owner/name, as in its address %s) and the revision", t, status, page)
	}
	return fmt.Errorf("hub: %s: the hub answered %s", t, status)
}
