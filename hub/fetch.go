package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A Progress hears how each file of a pull goes. Fetch calls it from its own goroutine, in order:
// for a file either Present, or Start, any number of Update, then Finish.
type Progress interface {
	// Present says name is in place and verified already, size bytes: nothing is fetched.
	Present(name string, size int64)
	// Start says name begins to transfer, with have bytes of size on disk already (a .part left
	// by an earlier pull); size is -1 when unknown.
	Start(name string, have, size int64)
	// Update says name has have bytes on disk now.
	Update(name string, have int64)
	// Finish says name ended: in place and verified when err is nil.
	Finish(name string, err error)
}

// ErrIncomplete is returned, wrapped, when a transfer ends before the whole file arrived (the
// connection broke, stalled, or the pull was interrupted); what arrived stays in the .part file
// for the next pull to continue. errors.Is finds it.
var ErrIncomplete = errors.New("the transfer broke off")

// ErrChecksum is returned, wrapped, when a downloaded file does not hash to what the hub lists;
// the download is removed, not put in place. errors.Is finds it.
var ErrChecksum = errors.New("checksum mismatch")

// errStartOver says a .part cannot be continued: a 416 answer to its range (it is no prefix of
// the file), or a whole .part that does not verify. Fetch removes it and downloads again.
var errStartOver = errors.New("the .part cannot be continued")

// PartSuffix ends the name of a file being downloaded, beside where it will be put.
const PartSuffix = ".part"

// Fetch puts file f of l at dest. When dest is there already and verifies, it reports it Present
// and fetches nothing. Otherwise it downloads into dest+PartSuffix, continuing from that file's
// length with a Range request when an earlier Fetch left one (starting over when the server
// ignores the range), verifies the whole, and renames it to dest. A transfer cut short, by the
// network or by ctx, leaves the .part and returns an error wrapping ErrIncomplete (and ctx's
// error); a file that does not verify is removed and the error wraps ErrChecksum. p may be nil.
// It returns whether it fetched the file.
func (c *Client) Fetch(ctx context.Context, l *Listing, f File, dest string, p Progress) (fetched bool, err error) {
	if p == nil {
		p = nopProgress{}
	}
	t := target{repo: l.Repo, revision: l.Revision, file: f.Name}
	if ok, err := present(dest, f); err != nil {
		return false, fmt.Errorf("hub: check %s: %w", dest, err)
	} else if ok {
		p.Present(f.Name, f.Size)
		return false, nil
	}
	err = c.download(ctx, l, f, dest, t, p)
	if errors.Is(err, errStartOver) {
		if err = os.Remove(dest + PartSuffix); err != nil {
			err = fmt.Errorf("hub: %s: %w", t, err)
			p.Finish(f.Name, err)
			return true, err
		}
		err = c.download(ctx, l, f, dest, t, p)
	}
	return true, err
}

// present reports whether dest holds f already: it has f's checksum when the hub lists one, or
// else its size.
func present(dest string, f File) (bool, error) {
	info, err := os.Stat(dest)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !info.Mode().IsRegular() || (f.Size >= 0 && info.Size() != f.Size) {
		return false, nil
	}
	sum := listedChecksum(f)
	if sum.kind == sizeOnly {
		return f.Size >= 0, nil
	}
	file, err := os.Open(dest)
	if err != nil {
		return false, err
	}
	defer file.Close()
	h := sum.newHash(info.Size())
	if _, err := io.Copy(h, file); err != nil {
		return false, err
	}
	return hex.EncodeToString(h.Sum(nil)) == sum.want, nil
}

// download transfers f into dest's .part, verifies it and renames it to dest. It reports the
// file's end to p unless it returns errStartOver.
func (c *Client) download(ctx context.Context, l *Listing, f File, dest string, t target, p Progress) (err error) {
	part := dest + PartSuffix
	if err := makeDirs(filepath.Dir(dest)); err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	file, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, fileMode)
	if err == nil {
		err = file.Chmod(fileMode) // whatever the umask: see fileMode
	}
	if err != nil {
		if file != nil {
			file.Close()
		}
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	defer func() {
		if cerr := file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("hub: %s: %w", t, cerr)
		}
		if !errors.Is(err, errStartOver) {
			p.Finish(f.Name, err)
		}
	}()
	have, err := file.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	if f.Size >= 0 && have > f.Size {
		have = 0 // longer than the file: not a prefix of it
	}
	if f.Size >= 0 && have == f.Size && listedChecksum(f).kind != sizeOnly {
		// Whole already (a pull that stopped before the rename): verify it without a request.
		p.Start(f.Name, have, f.Size)
		return finishWhole(file, part, dest, f.Size, listedChecksum(f), t)
	}
	var header http.Header
	if have > 0 {
		header = http.Header{"Range": {fmt.Sprintf("bytes=%d-", have)}}
	}
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.endpoint(), l.Repo, l.Commit, escapePath(f.Name))
	resp, hubHeader, err := c.get(ctx, u, header, t)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if commit := hubHeader.Get("X-Repo-Commit"); commit != "" && commit != l.Commit {
		return fmt.Errorf("hub: %s: asked for commit %s, the hub answered with %s", t, l.Commit, commit)
	}
	size, from, err := responseExtent(resp, f.Size, have)
	if err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	have = from // 0 when the server ignored the range
	sum := listedChecksum(f)
	if sum.kind == sizeOnly {
		sum = headerChecksum(hubHeader)
	}
	if size < 0 && sum.kind == gitSHA1 {
		sum = checksum{} // a blob id hashes the size first
	}
	h := sum.newHash(size)
	if err := file.Truncate(have); err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	if _, err := io.CopyN(h, file, have); err != nil {
		return fmt.Errorf("hub: %s: read %s: %w", t, part, err)
	}
	p.Start(f.Name, have, size)
	have, err = copyBody(ctx, file, io.MultiWriter(file, h), resp.Body, have, func(n int64) { p.Update(f.Name, n) })
	if err != nil || (size >= 0 && have < size) {
		return incomplete(ctx, t, part, have, size, err)
	}
	if size >= 0 && have > size {
		os.Remove(part)
		return fmt.Errorf("hub: %s: the hub sent %d bytes of a %d-byte file; the download is removed: run the pull again", t, have, size)
	}
	return finishHashed(file, part, dest, have, sum, h, t)
}

// copyBody copies body to w (the .part at offset have, and the hash) until it ends or ctx is
// done, calling update after each write with the bytes on disk, and returns their count.
func copyBody(ctx context.Context, file *os.File, w io.Writer, body io.Reader, have int64, update func(int64)) (int64, error) {
	if _, err := file.Seek(have, io.SeekStart); err != nil {
		return have, err
	}
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return have, err // the transport may still hold bytes it read before the cancel
		}
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return have, err
			}
			have += int64(n)
			update(have)
		}
		if rerr == io.EOF {
			return have, nil
		}
		if rerr != nil {
			return have, rerr
		}
	}
}

// incomplete is the error of a transfer that ended at have bytes of size: what arrived stays.
func incomplete(ctx context.Context, t target, part string, have, size int64, cause error) error {
	of := formatBytes(have)
	if size >= 0 {
		of += " of " + formatBytes(size)
	}
	keep := fmt.Sprintf("what arrived is kept in %s: run the pull again to resume", part)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("hub: %s: %w at %s: interrupted (%w); %s", t, ErrIncomplete, of, ctx.Err(), keep)
	case cause == nil:
		cause = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("hub: %s: %w at %s (%w); %s", t, ErrIncomplete, of, cause, keep)
}

// finishWhole verifies a .part that is as long as the file and renames it to dest; one that does
// not verify is to be downloaded again (errStartOver).
func finishWhole(file *os.File, part, dest string, size int64, sum checksum, t target) error {
	h := sum.newHash(size)
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	if _, err := io.Copy(h, file); err != nil {
		return fmt.Errorf("hub: %s: read %s: %w", t, part, err)
	}
	if hex.EncodeToString(h.Sum(nil)) != sum.want {
		return fmt.Errorf("hub: %s: %s: %w", t, part, errStartOver)
	}
	return finishHashed(file, part, dest, size, sum, h, t)
}

// finishHashed checks the hash of the whole .part (size bytes) against sum, then syncs it and
// renames it to dest; a .part that does not verify is removed.
func finishHashed(file *os.File, part, dest string, size int64, sum checksum, h hash.Hash, t target) error {
	if got := hex.EncodeToString(h.Sum(nil)); sum.kind != sizeOnly && got != sum.want {
		os.Remove(part)
		return fmt.Errorf("hub: %s: %w: the %d bytes received have %s %s, the hub lists %s; the download is removed: run the pull again (if it fails again, something between here and the hub changes the bytes)",
			t, ErrChecksum, size, sum.kind, got, sum.want)
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	if err := os.Rename(part, dest); err != nil {
		return fmt.Errorf("hub: %s: %w", t, err)
	}
	return nil
}

// responseExtent reads the file's size and where the response's body starts in the file from a
// 200 or 206 answer to a request from byte have (0: no range asked). listed is the listed size
// (-1 unknown).
func responseExtent(resp *http.Response, listed, have int64) (size, from int64, err error) {
	size = listed
	if resp.StatusCode != http.StatusPartialContent {
		// A whole answer: a server that ignores Range sends the file from its first byte.
		if size < 0 && resp.ContentLength >= 0 {
			size = resp.ContentLength
		}
		return size, 0, nil
	}
	start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
	switch {
	case !ok:
		return 0, 0, fmt.Errorf("a partial answer with Content-Range %q", resp.Header.Get("Content-Range"))
	case start != have:
		return 0, 0, fmt.Errorf("asked for the bytes from %d, the hub sent them from %d", have, start)
	case total >= 0 && size >= 0 && total != size:
		return 0, 0, fmt.Errorf("the hub lists %d bytes, its answer says %d", size, total)
	case size < 0:
		size = total
	}
	return size, start, nil
}

// contentRangePattern is a Content-Range header: bytes START-END/TOTAL, TOTAL may be *.
var contentRangePattern = regexp.MustCompile(`^bytes (\d+)-\d+/(\d+|\*)$`)

// parseContentRange returns a Content-Range's first byte and the file's size (-1 when "*").
func parseContentRange(s string) (start, total int64, ok bool) {
	m := contentRangePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	total = -1
	if m[2] != "*" {
		if total, err = strconv.ParseInt(m[2], 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return start, total, true
}

// The kinds of checksum a file is verified with.
const (
	sizeOnly = ""         // no content hash known: the size is checked
	sha256Of = "sha256"   // sha256 of the content (LFS files)
	gitSHA1  = "git blob" // sha1 of "blob SIZE\x00" and the content (files in git)
)

// checksum is what a file's content must hash to.
type checksum struct {
	kind string
	want string // lower-case hex
}

// listedChecksum returns the checksum the listing gives f: its LFS sha256, else its blob id.
func listedChecksum(f File) checksum {
	switch {
	case f.SHA256 != "":
		return checksum{sha256Of, f.SHA256}
	case f.BlobID != "" && f.Size >= 0:
		return checksum{gitSHA1, f.BlobID}
	}
	return checksum{}
}

// hexPattern is a lower-case hex string.
var hexPattern = regexp.MustCompile(`^[0-9a-f]+$`)

// headerChecksum reads a checksum from the hub's answer when it is a plain content hash:
// X-Linked-Etag (an LFS file's sha256) or ETag (a plain file's blob id), quoted, perhaps weak.
func headerChecksum(h http.Header) checksum {
	tag := h.Get("X-Linked-Etag")
	if tag == "" {
		tag = h.Get("ETag")
	}
	tag = strings.ToLower(strings.Trim(strings.TrimPrefix(tag, "W/"), `"`))
	switch {
	case !hexPattern.MatchString(tag):
		return checksum{}
	case len(tag) == 64:
		return checksum{sha256Of, tag}
	case len(tag) == 40:
		return checksum{gitSHA1, tag}
	}
	return checksum{}
}

// newHash returns a hash ready for the content of a file of size bytes.
func (c checksum) newHash(size int64) hash.Hash {
	switch c.kind {
	case sha256Of:
		return sha256.New()
	case gitSHA1:
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", size)
		return h
	}
	return discardHash{}
}

// discardHash is the hash of a size-only check: it keeps nothing.
type discardHash struct{}

func (discardHash) Write(p []byte) (int, error) { return len(p), nil }
func (discardHash) Sum(b []byte) []byte         { return b }
func (discardHash) Reset()                      {}
func (discardHash) Size() int                   { return 0 }
func (discardHash) BlockSize() int              { return 1 }

// The modes of what a pull makes, whatever the umask (a root shell's may be 077): the service
// reads the models folder as a user that owns none of it.
const (
	fileMode = 0o644
	dirMode  = 0o755
)

// makeDirs makes dir and the folders above it that are missing, each with dirMode.
func makeDirs(dir string) error {
	if info, err := os.Stat(dir); err == nil && info.IsDir() {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := makeDirs(parent); err != nil {
			return err
		}
	}
	err := os.Mkdir(dir, dirMode)
	if errors.Is(err, fs.ErrExist) {
		return nil // made meanwhile, or not a folder: the file's creation will say
	}
	if err != nil {
		return err
	}
	return os.Chmod(dir, dirMode)
}

// escapePath escapes each segment of a slash-separated path for a URL.
func escapePath(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// formatBytes writes n bytes for a person: 512 B, 1.5 KiB, 3.2 GiB.
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	x, i := float64(n), 0
	for math.Abs(x) >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", x, units[i])
}

// nopProgress hears nothing.
type nopProgress struct{}

func (nopProgress) Present(string, int64)      {}
func (nopProgress) Start(string, int64, int64) {}
func (nopProgress) Update(string, int64)       {}
func (nopProgress) Finish(string, error)       {}
