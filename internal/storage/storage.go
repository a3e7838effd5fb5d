// Package storage is segtune's one way to folders and files that may be
// local or in object storage: s3:// (Amazon S3 and S3-compatible servers
// such as MinIO), gs:// (Google Cloud Storage) and azblob:// (Azure Blob
// Storage), through gocloud.dev/blob, the Go CDK's portable blob API — one
// well-kept library for the three services instead of three SDKs, with an
// in-memory bucket (memblob) for tests. A file:// URL is a local path.
//
// Local folders keep segtune's local behaviour exactly: listings are
// os.ReadDir's, files are opened through internal/regfile (regular files
// only) and written through internal/atomicfile (temporary file, rename).
// Bucket folders are listed a page at a time (a streamed iterator; no
// listing is held in memory), and every write goes through one blob.Writer
// that the service commits on Close and that is aborted (its context
// cancelled) on any error, so a reader never sees a partial object.
//
// A bucket URL is scheme://BUCKET/PREFIX?OPTIONS, the options being the
// Go CDK's: for S3-compatible servers e.g.
// s3://bucket/images?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1.
// Credentials come from each service's usual sources (AWS_* variables and
// ~/.aws; GOOGLE_APPLICATION_CREDENTIALS or gcloud's; AZURE_STORAGE_*).
package storage

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
)

// Schemes are the object-storage URL schemes accepted.
var Schemes = []string{"s3", "gs", "azblob"}

// backends holds, for each scheme whose gocloud driver this build has
// (backend_*.go; build tags nos3, nogcs and noazure leave one out), the
// check made before its bucket is opened, or nil.
var backends = map[string]func(ctx context.Context, l Location) error{}

// buildTags names the build tag that leaves each scheme out.
var buildTags = map[string]string{"s3": "nos3", "gs": "nogcs", "azblob": "noazure"}

var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// IsURL reports whether v is written as a URL (scheme://…) rather than a
// path; it says nothing of whether the scheme is supported.
func IsURL(v string) bool { return schemeRE.MatchString(v) }

// knownSchemeRE matches a value that starts with a scheme segtune reads,
// with or without the "//" that makes it a URL.
var knownSchemeRE = regexp.MustCompile(`(?i)^(file|s3|gs|azblob):`)

// NamesScheme reports whether v starts with file:, s3:, gs: or azblob:,
// written as a URL or not: such a value is a URL or a mistyped one, never
// meant as a local name, and goes through Parse.
func NamesScheme(v string) bool { return knownSchemeRE.MatchString(v) }

// Location is a parsed folder or file: a local path, or a bucket and a
// key (prefix) in it.
type Location struct {
	// Local is the path, for a local folder or file.
	Local string
	// Scheme, Bucket and Key locate an object or a prefix; BucketURL is
	// what gocloud opens (scheme://bucket?options).
	Scheme, Bucket, Key string
	BucketURL           string
}

// IsLocal reports whether l is on the local file system.
func (l Location) IsLocal() bool { return l.Scheme == "" }

// String is the local path, or scheme://bucket/key without the options.
func (l Location) String() string {
	if l.IsLocal() {
		return l.Local
	}
	if l.Key == "" {
		return l.Scheme + "://" + l.Bucket
	}
	return l.Scheme + "://" + l.Bucket + "/" + l.Key
}

// Parse reads a local path or an s3://, gs://, azblob:// or file:// URL
// (file:/PATH too, RFC 8089's short form). It does no I/O. The error says
// what is accepted. A known scheme without "//" (file:out, s3:bucket/x) is
// refused rather than read as a local name with a colon in it.
func Parse(v string) (Location, error) {
	if !IsURL(v) {
		if v == "" {
			return Location{}, errors.New("empty path")
		}
		m := knownSchemeRE.FindStringSubmatch(v)
		if m == nil {
			return Location{Local: v}, nil
		}
		scheme := strings.ToLower(m[1])
		if scheme != "file" {
			return Location{}, fmt.Errorf("%q lacks the // of a URL: write %s://BUCKET/PREFIX, or ./%s for a local name", v, scheme, v)
		}
		if !strings.HasPrefix(v[len(m[0]):], "/") {
			return Location{}, fmt.Errorf("%q is not an absolute file URL: write file:///ABSOLUTE/PATH or a plain path (./%s for a local name with a colon)", v, v)
		}
	}
	u, err := url.Parse(v)
	if err != nil {
		return Location{}, fmt.Errorf("not a valid URL: %v", err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("file URL with host %q: only local files (file:///PATH) are supported", u.Host)
		}
		if u.Path == "" {
			return Location{}, errors.New("file URL without a path")
		}
		return Location{Local: filepath.FromSlash(u.Path)}, nil
	}
	known := false
	for _, s := range Schemes {
		known = known || s == scheme
	}
	if !known {
		return Location{}, fmt.Errorf("unsupported URL scheme %q: give a local path or an s3://, gs:// or azblob:// URL (or file:///PATH)", u.Scheme)
	}
	if u.Host == "" {
		return Location{}, fmt.Errorf("%s URL without a bucket (want %s://BUCKET/PREFIX)", scheme, scheme)
	}
	key := strings.TrimPrefix(u.Path, "/")
	if strings.Contains("/"+key+"/", "/../") || strings.Contains("/"+key+"/", "/./") || strings.Contains(key, "//") {
		return Location{}, fmt.Errorf("%s: key %q has empty, . or .. parts", v, key)
	}
	b := url.URL{Scheme: scheme, Host: u.Host, RawQuery: u.RawQuery}
	return Location{Scheme: scheme, Bucket: u.Host, Key: key, BucketURL: b.String()}, nil
}

// hint says where a service's credentials and endpoint come from, for
// errors on first access.
func hint(scheme string) string {
	switch scheme {
	case "s3":
		return "AWS credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws (add ?anonymous=true for a public bucket); " +
			"an S3-compatible server is named by ?endpoint=URL&use_path_style=true or AWS_ENDPOINT_URL; the region by ?region= or AWS_REGION"
	case "gs":
		return "Google Cloud credentials come from GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`"
	case "azblob":
		return "Azure credentials come from AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_CONNECTION_STRING, or an Azure identity"
	}
	return ""
}

// openBucket opens the bucket of l. Credentials that a service reads when
// a bucket is opened are checked here (by its backend), so that their
// absence is an error before any work.
func openBucket(ctx context.Context, l Location) (*blob.Bucket, error) {
	check, ok := backends[l.Scheme]
	if !ok {
		return nil, fmt.Errorf("%s: this segtune was built without %s:// support (build tag %s)", l, l.Scheme, buildTags[l.Scheme])
	}
	if check != nil {
		if err := check(ctx, l); err != nil {
			return nil, err
		}
	}
	b, err := blob.OpenBucket(ctx, l.BucketURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; %s", l, err, hint(l.Scheme))
	}
	return b, nil
}

// IsNotExist reports whether err says that a file or object does not exist.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || gcerrors.Code(err) == gcerrors.NotFound
}

// Folder is a local folder or a prefix in a bucket.
type Folder struct {
	loc    Location
	bucket *blob.Bucket // nil for local folders
	prefix string       // the key prefix, "" or ending in "/"
	owned  bool         // Close closes bucket
}

// OpenFolder opens the folder v names (a path or a URL). Opening does no
// request: CheckList or CheckAccess find out whether it can be used.
func OpenFolder(ctx context.Context, v string) (*Folder, error) {
	l, err := Parse(v)
	if err != nil {
		return nil, err
	}
	return openFolder(ctx, l)
}

func openFolder(ctx context.Context, l Location) (*Folder, error) {
	if l.IsLocal() {
		return &Folder{loc: l}, nil
	}
	b, err := openBucket(ctx, l)
	if err != nil {
		return nil, err
	}
	return NewBucketFolder(b, l, true), nil
}

// NewBucketFolder returns the folder l.Key of bucket b, e.g. a memblob
// bucket in tests; owned makes Close close b.
func NewBucketFolder(b *blob.Bucket, l Location, owned bool) *Folder {
	p := strings.TrimSuffix(l.Key, "/")
	if p != "" {
		p += "/"
	}
	l.Key = strings.TrimSuffix(l.Key, "/")
	return &Folder{loc: l, bucket: b, prefix: p, owned: owned}
}

// Close releases the bucket.
func (f *Folder) Close() error {
	if f.bucket != nil && f.owned {
		return f.bucket.Close()
	}
	return nil
}

// IsLocal reports whether f is a local folder.
func (f *Folder) IsLocal() bool { return f.bucket == nil }

// Location returns where f is.
func (f *Folder) Location() Location { return f.loc }

// String is the folder as the user sees it (no URL options).
func (f *Folder) String() string { return f.loc.String() }

// Path is the file called name in f, as the user sees it: a local path, or
// scheme://bucket/prefix/name.
func (f *Folder) Path(name string) string {
	if f.IsLocal() {
		return filepath.Join(f.loc.Local, name)
	}
	return f.loc.Scheme + "://" + f.loc.Bucket + "/" + f.prefix + name
}

// Sub returns the folder name inside f (sharing f's bucket).
func (f *Folder) Sub(name string) *Folder {
	if f.IsLocal() {
		return &Folder{loc: Location{Local: filepath.Join(f.loc.Local, name)}}
	}
	l := f.loc
	l.Key = f.prefix + name
	return NewBucketFolder(f.bucket, l, false)
}

// MkdirAll creates a local folder (and its parents); buckets need none.
func (f *Folder) MkdirAll() error {
	if f.IsLocal() {
		return os.MkdirAll(f.loc.Local, 0o755)
	}
	return nil
}

// CheckWritable finds out before any work whether files can be written
// into a local folder f, creating it, by creating and removing a hidden
// file there: a read-only place then fails at once instead of after the
// work whose result it was to hold. Bucket folders are not probed (a
// probe object could be seen by the bucket's other readers).
func (f *Folder) CheckWritable() error {
	if !f.IsLocal() {
		return nil
	}
	if err := f.MkdirAll(); err != nil {
		return err
	}
	probe, err := os.CreateTemp(f.loc.Local, ".segtune-write-check-*")
	if err != nil {
		return err
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// Within reports whether f is sub, or sub is inside f, in the same bucket
// (both bucket folders); local folders are compared by the caller, which
// resolves symbolic links.
func (f *Folder) Within(sub *Folder) bool {
	if f.IsLocal() || sub.IsLocal() || f.loc.Scheme != sub.loc.Scheme || f.loc.Bucket != sub.loc.Bucket {
		return false
	}
	return strings.HasPrefix(sub.prefix, f.prefix)
}

// wrap adds the location and, for access errors other than a missing
// object, where credentials come from.
func (f *Folder) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if f.IsLocal() || IsNotExist(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied, gcerrors.Unknown, gcerrors.Internal, gcerrors.Unimplemented:
		return fmt.Errorf("%s: %w (%s)", what, err, hint(f.loc.Scheme))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// CheckList makes one listing request, so that a folder that cannot be
// listed (no such bucket, no credentials, no permission) is an error
// before any work. A local folder must exist.
func (f *Folder) CheckList(ctx context.Context) error {
	if f.IsLocal() {
		fi, err := os.Stat(f.loc.Local)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a folder", f.loc.Local)
		}
		return nil
	}
	_, _, err := f.bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: f.prefix, Delimiter: "/"})
	return f.wrap("listing "+f.String(), err)
}

// CheckAccess makes one read request (the attributes of an object that
// does not exist), so that missing credentials or permissions are an error
// before any work. Local folders are created when written to and need no
// check.
func (f *Folder) CheckAccess(ctx context.Context) error {
	if f.IsLocal() {
		return nil
	}
	_, err := f.bucket.Attributes(ctx, f.prefix+".segtune-access-check")
	if err == nil || IsNotExist(err) {
		return nil
	}
	return f.wrap("accessing "+f.String(), err)
}

// List yields the names of the files directly in f, in byte order (the
// order of os.ReadDir and of object-store listings), without sub-folders
// and hidden names (".x", e.g. atomic-write temporaries). A bucket is
// listed a page at a time as the sequence is consumed. An error ends the
// sequence.
func (f *Folder) List(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if f.IsLocal() {
			entries, err := os.ReadDir(f.loc.Local)
			if err != nil {
				yield("", err)
				return
			}
			for _, e := range entries {
				if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
					continue
				}
				if !yield(e.Name(), nil) {
					return
				}
			}
			return
		}
		it := f.bucket.List(&blob.ListOptions{Prefix: f.prefix, Delimiter: "/"})
		prev := ""
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield("", f.wrap("listing "+f.String(), err))
				return
			}
			name := strings.TrimPrefix(obj.Key, f.prefix)
			if obj.IsDir || name == "" || strings.HasPrefix(name, ".") || strings.Contains(name, "/") {
				continue
			}
			if name <= prev {
				yield("", fmt.Errorf("listing %s: %q came after %q: the store does not list in byte order", f, name, prev))
				return
			}
			prev = name
			if !yield(name, nil) {
				return
			}
		}
	}
}

// Object is a file found by Walk.
type Object struct {
	// Name is the path inside the folder, with "/" separators.
	Name string
	Size int64
	// MD5 is the content's MD5 where the store reports it (nil otherwise).
	MD5 []byte
}

// Walk yields every file under f (bucket folders only: local trees need no
// walking to be read), a page at a time, skipping hidden names.
func (f *Folder) Walk(ctx context.Context) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		if f.IsLocal() {
			yield(Object{}, fmt.Errorf("%s: Walk is for bucket folders", f))
			return
		}
		it := f.bucket.List(&blob.ListOptions{Prefix: f.prefix})
		for {
			obj, err := it.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Object{}, f.wrap("listing "+f.String(), err))
				return
			}
			name := strings.TrimPrefix(obj.Key, f.prefix)
			if obj.IsDir || name == "" || strings.HasSuffix(name, "/") || strings.HasPrefix(path.Base(name), ".") {
				continue
			}
			if !yield(Object{Name: name, Size: obj.Size, MD5: obj.MD5}, nil) {
				return
			}
		}
	}
}

// Open opens the file called name in f for reading (local files must be
// regular files). A missing file gives an error for which IsNotExist holds.
func (f *Folder) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if f.IsLocal() {
		r, _, err := regfile.Open(filepath.Join(f.loc.Local, name))
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	r, err := f.bucket.NewReader(ctx, f.prefix+name, nil)
	if err != nil {
		return nil, f.wrap("reading "+f.Path(name), err)
	}
	return r, nil
}

// Exists reports whether the file called name is in f.
func (f *Folder) Exists(ctx context.Context, name string) (bool, error) {
	if f.IsLocal() {
		_, err := os.Lstat(filepath.Join(f.loc.Local, name))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	ok, err := f.bucket.Exists(ctx, f.prefix+name)
	return ok, f.wrap("checking "+f.Path(name), err)
}

// ReadAll reads the file called name, refusing more than limit bytes with
// a *regfile.TooLargeError naming it — from its size, before reading it.
func (f *Folder) ReadAll(ctx context.Context, name string, limit int64) ([]byte, error) {
	if f.IsLocal() {
		return regfile.ReadSmall(filepath.Join(f.loc.Local, name), limit)
	}
	r, err := f.bucket.NewReader(ctx, f.prefix+name, nil)
	if err != nil {
		return nil, f.wrap("reading "+f.Path(name), err)
	}
	defer r.Close()
	if r.Size() > limit { // refused unread
		return nil, &regfile.TooLargeError{Path: f.Path(name), Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Path(name), err)
	}
	if int64(len(data)) > limit {
		return nil, &regfile.TooLargeError{Path: f.Path(name), Limit: limit}
	}
	return data, nil
}

// Write writes the file called name in f from what write produces, so
// that readers see the old file or the complete new one and never a part:
// locally through atomicfile; in a bucket through one blob.Writer that is
// committed by Close, or aborted (its context cancelled) when write fails.
func (f *Folder) Write(ctx context.Context, name string, write func(io.Writer) error) error {
	if f.IsLocal() {
		return atomicfile.WriteFunc(filepath.Join(f.loc.Local, name), 0o644, write)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := f.bucket.NewWriter(wctx, f.prefix+name, &blob.WriterOptions{ContentType: contentType(name)})
	if err != nil {
		return f.wrap("writing "+f.Path(name), err)
	}
	if err := write(w); err != nil {
		cancel() // aborts the upload: nothing is committed
		w.Close()
		return fmt.Errorf("writing %s: %w", f.Path(name), err)
	}
	return f.wrap("writing "+f.Path(name), w.Close())
}

// Download copies the file called name in f to the local file dst,
// atomically.
func (f *Folder) Download(ctx context.Context, name, dst string) error {
	r, err := f.Open(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := atomicfile.WriteFunc(dst, 0o644, func(w io.Writer) error { _, err := io.Copy(w, r); return err }); err != nil {
		return fmt.Errorf("downloading %s: %w", f.Path(name), err)
	}
	return nil
}

func contentType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".json":
		return "application/json"
	}
	return "application/octet-stream"
}

// OpenFile opens the folder holding the file v names and returns it with
// the file's name in it.
func OpenFile(ctx context.Context, v string) (*Folder, string, error) {
	l, err := Parse(v)
	if err != nil {
		return nil, "", err
	}
	if l.IsLocal() {
		dir, name := filepath.Split(l.Local)
		if name == "" {
			return nil, "", fmt.Errorf("%s names a folder, not a file", v)
		}
		if dir == "" {
			dir = "."
		}
		return &Folder{loc: Location{Local: filepath.Clean(dir)}}, name, nil
	}
	if l.Key == "" || strings.HasSuffix(l.Key, "/") {
		return nil, "", fmt.Errorf("%s names a bucket or folder, not an object", l)
	}
	dir, name := path.Split(l.Key)
	l.Key = strings.TrimSuffix(dir, "/")
	f, err := openFolder(ctx, l)
	if err != nil {
		return nil, "", err
	}
	return f, name, nil
}

// Fetch makes the local file dst a copy of the file called name in f,
// downloading it (atomically) unless dst already matches it: same size,
// same modification time (set from the object's at download), and same
// MD5 where the store reports one. It returns whether it downloaded.
// dst is an entry of segtune's cache: what is there and not a regular
// file (a link, a FIFO) is removed and fetched again, never followed.
func (f *Folder) Fetch(ctx context.Context, name, dst string) (bool, error) {
	if f.IsLocal() {
		return false, fmt.Errorf("%s: Fetch is for bucket folders", f)
	}
	attrs, err := f.bucket.Attributes(ctx, f.prefix+name)
	if err != nil {
		return false, f.wrap(f.Path(name), err)
	}
	atomicfile.ClearCacheEntry(dst)
	if fresh(dst, attrs.Size, attrs.ModTime, attrs.MD5) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	if err := f.Download(ctx, name, dst); err != nil {
		return false, err
	}
	if !attrs.ModTime.IsZero() {
		os.Chtimes(dst, attrs.ModTime, attrs.ModTime)
	}
	return true, nil
}

// fresh reports whether the local file path has the given size, modtime
// and (if given) MD5.
func fresh(p string, size int64, mod time.Time, sum []byte) bool {
	file, fi, err := regfile.Open(p)
	if err != nil {
		return false
	}
	defer file.Close()
	if fi.Size() != size || mod.IsZero() || !fi.ModTime().Equal(mod) {
		return false
	}
	if len(sum) == 0 {
		return true
	}
	h := md5.New()
	if _, err := io.Copy(h, io.LimitReader(file, size)); err != nil {
		return false
	}
	return bytes.Equal(h.Sum(nil), sum)
}

// Delete removes the file called name from f.
func (f *Folder) Delete(ctx context.Context, name string) error {
	if f.IsLocal() {
		return os.Remove(filepath.Join(f.loc.Local, name))
	}
	return f.wrap("deleting "+f.Path(name), f.bucket.Delete(ctx, f.prefix+name))
}
