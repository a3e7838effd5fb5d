package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/segtune/segtune/internal/regfile"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Location{
		"dir/sub":         {Local: "dir/sub"},
		"./file:out2":     {Local: "./file:out2"}, // a local name of that shape
		"http:x":          {Local: "http:x"},      // not a scheme segtune reads
		"file:///tmp/x":   {Local: "/tmp/x"},
		"FILE:/tmp/x":     {Local: "/tmp/x"},
		"./file:out":      {Local: "./file:out"},
		"c:/x":            {Local: "c:/x"},
		"s3://b":          {Scheme: "s3", Bucket: "b", BucketURL: "s3://b"},
		"s3://b/in/imgs/": {Scheme: "s3", Bucket: "b", Key: "in/imgs/", BucketURL: "s3://b"},
		"gs://b/x.onnx":   {Scheme: "gs", Bucket: "b", Key: "x.onnx", BucketURL: "gs://b"},
		"azblob://c/p":    {Scheme: "azblob", Bucket: "c", Key: "p", BucketURL: "azblob://c"},
		"S3://b/p?region=x&endpoint=http://127.0.0.1:9000": {Scheme: "s3", Bucket: "b", Key: "p",
			BucketURL: "s3://b?region=x&endpoint=http://127.0.0.1:9000"},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if l, _ := Parse("s3://b/p?region=x"); l.String() != "s3://b/p" {
		t.Errorf("String() = %q: the options must not be shown", l.String())
	}
	for in, want := range map[string]string{
		"http://host/x": `unsupported URL scheme "http"`,
		"ftp://h/x":     "s3://, gs:// or azblob://",
		"mem://b":       "unsupported URL scheme",
		"s3:///x":       "without a bucket",
		"s3://b/a/../c": "..",
		"file://host/x": "only local files",
		"file:out2":     "file:///ABSOLUTE/PATH",
		"File:./out":    "not an absolute file URL",
		"s3:bucket/x":   "lacks the // of a URL",
		"GS:b":          "gs://BUCKET/PREFIX",
		"azblob:c/p":    "lacks the //",
		"":              "empty path",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): error %v, want one containing %q", in, err, want)
		}
	}
}

// memFolder is the folder prefix of a fresh in-memory bucket.
func memFolder(t *testing.T, prefix string) (*Folder, *blob.Bucket) {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	return NewBucketFolder(b, Location{Scheme: "s3", Bucket: "mem", Key: prefix}, false), b
}

func collect(t *testing.T, seq func(func(string, error) bool)) []string {
	t.Helper()
	var out []string
	for n, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestBucketListIsStreamedSortedAndFlat(t *testing.T) {
	ctx := context.Background()
	f, b := memFolder(t, "in")
	var want []string
	// More than one page (the iterator's page is 1000 keys).
	for i := 0; i < 2100; i++ {
		name := fmt.Sprintf("img%05d.png", i)
		want = append(want, name)
		b.WriteAll(ctx, "in/"+name, []byte("x"), nil)
	}
	for _, k := range []string{"in/.hidden.png", "in/sub/deep.png", "inx/other.png", "top.png"} {
		b.WriteAll(ctx, k, []byte("x"), nil)
	}
	got := collect(t, f.List(ctx))
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d names (first %v), want %d", len(got), got[:min(3, len(got))], len(want))
	}
	// Stopping early stops the listing.
	n := 0
	for range f.List(ctx) {
		n++
		if n == 5 {
			break
		}
	}
	if err := f.CheckList(ctx); err != nil {
		t.Error(err)
	}
	if p := f.Path("a.png"); p != "s3://mem/in/a.png" {
		t.Errorf("Path = %q", p)
	}
	if sub := f.Sub("overlays"); sub.Path("a.png") != "s3://mem/in/overlays/a.png" || !f.Within(sub) || sub.Within(f) {
		t.Errorf("Sub/Within wrong: %s", sub.Path("a.png"))
	}
	root := NewBucketFolder(b, Location{Scheme: "s3", Bucket: "mem"}, false)
	if got := collect(t, root.List(ctx)); !slices.Equal(got, []string{"top.png"}) {
		t.Errorf("bucket root lists %v", got)
	}
	var walked []string
	for o, err := range f.Walk(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, o.Name)
	}
	if len(walked) != 2101 || !slices.Contains(walked, "sub/deep.png") || slices.Contains(walked, ".hidden.png") {
		t.Errorf("walk found %d objects", len(walked))
	}
}

func TestLocalListMatchesReadDir(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.png", "a.jpg", ".a.png.tmp-1-2", "c.txt"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	f, err := OpenFolder(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, f.List(context.Background())); !slices.Equal(got, []string{"a.jpg", "b.png", "c.txt"}) {
		t.Errorf("listed %v", got)
	}
	if err := f.CheckList(context.Background()); err != nil {
		t.Error(err)
	}
	missing, _ := OpenFolder(context.Background(), filepath.Join(dir, "nope"))
	if err := missing.CheckList(context.Background()); !IsNotExist(err) {
		t.Errorf("missing folder: %v", err)
	}
}

// A failed write leaves nothing behind, in a bucket and on disk, and an
// earlier complete object stays as it was.
func TestWriteIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	bucket, _ := memFolder(t, "out")
	local, _ := OpenFolder(ctx, t.TempDir())
	boom := errors.New("encoder failed")
	for _, f := range []*Folder{bucket, local} {
		if err := f.Write(ctx, "a.png", func(w io.Writer) error { _, err := w.Write([]byte("complete")); return err }); err != nil {
			t.Fatal(err)
		}
		err := f.Write(ctx, "a.png", func(w io.Writer) error {
			w.Write(bytes.Repeat([]byte("partial"), 100000))
			return boom
		})
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "a.png") {
			t.Errorf("%s: error %v", f, err)
		}
		if data, err := f.ReadAll(ctx, "a.png", 100); err != nil || string(data) != "complete" {
			t.Errorf("%s: after a failed write a.png holds %q, %v", f, data, err)
		}
		err = f.Write(ctx, "b.png", func(w io.Writer) error { w.Write([]byte("half")); return boom })
		if err == nil {
			t.Error("failed write reported success")
		}
		if ok, err := f.Exists(ctx, "b.png"); ok || err != nil {
			t.Errorf("%s: a failed first write left b.png (exists %v, %v)", f, ok, err)
		}
		if _, err := f.Open(ctx, "b.png"); !IsNotExist(err) {
			t.Errorf("%s: open of a missing file: %v", f, err)
		}
		if _, err := f.ReadAll(ctx, "a.png", 3); err == nil || !strings.Contains(err.Error(), "larger than 3 bytes") {
			t.Errorf("limit not enforced: %v", err)
		}
	}
	if names := collect(t, local.List(ctx)); !slices.Equal(names, []string{"a.png"}) {
		t.Errorf("local folder holds %v after failed writes (temporaries left?)", names)
	}
}

// A file over the limit is refused from its size, before it is read: a
// sparse file of 8 GiB takes no memory and no time to refuse.
func TestReadAllRefusesLargeFileUnread(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 << 30); err != nil {
		t.Skipf("no sparse file: %v", err)
	}
	f.Close()
	local, _ := OpenFolder(context.Background(), dir)
	_, err = local.ReadAll(context.Background(), "big.json", 1<<20)
	var tooLarge *regfile.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Path != big {
		t.Errorf("err = %v, want a *regfile.TooLargeError naming %s", err, big)
	}
}

func TestOpenFile(t *testing.T) {
	ctx := context.Background()
	f, name, err := OpenFile(ctx, "models/m.onnx")
	if err != nil || name != "m.onnx" || f.Path(name) != filepath.Join("models", "m.onnx") {
		t.Errorf("OpenFile(local) = %v, %q, %v", f, name, err)
	}
	if _, _, err := OpenFile(ctx, "s3://b/"); err == nil {
		t.Error("a bucket accepted as a file")
	}
	if _, _, err := OpenFile(ctx, "gopher://b/x"); err == nil {
		t.Error("unknown scheme accepted")
	}
}

// Opening a bucket without credentials is an error that says where they
// come from, before any request (no network: Google's library is pointed
// at a credentials file that does not exist, so it looks nowhere else;
// Azure's needs an account name before it looks for credentials).
func TestMissingCredentials(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	_, err := OpenFolder(context.Background(), "gs://bucket/in")
	if err == nil || !strings.Contains(err.Error(), "no Google Cloud credentials") || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Errorf("gs without credentials: %v", err)
	}
	for _, v := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING"} {
		t.Setenv(v, "")
	}
	_, err = OpenFolder(context.Background(), "azblob://container/in")
	if err == nil || !strings.Contains(err.Error(), "AZURE_STORAGE_ACCOUNT") {
		t.Errorf("azblob without an account: %v", err)
	}
}

// Without credentials, a bucket on an S3-compatible server (endpoint=)
// must not send the AWS SDK to the EC2 instance-metadata service: the
// service is a fake on 127.0.0.1 counting requests, and an explicit
// AWS_EC2_METADATA_DISABLED=false shows that it would be asked otherwise.
func TestCustomEndpointSkipsInstanceMetadata(t *testing.T) {
	var metadataRequests atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metadataRequests.Add(1)
		http.NotFound(w, r)
	}))
	defer imds.Close()
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
	}))
	defer s3.Close()
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_EC2_METADATA_DISABLED"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	url := "s3://bucket/in?endpoint=" + s3.URL + "&use_path_style=true&region=us-east-1"
	list := func() error {
		f, err := OpenFolder(context.Background(), url)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.CheckList(context.Background())
	}
	if err := list(); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("listing without credentials: %v", err)
	}
	if n := metadataRequests.Load(); n != 0 {
		t.Errorf("%d requests to the instance-metadata service", n)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	list()
	if metadataRequests.Load() == 0 {
		t.Error("with AWS_EC2_METADATA_DISABLED=false the fake metadata service was not asked: the test cannot tell")
	}
}

// An object whose size is over the limit is refused before it is read.
func TestReadAllRefusesLargeObjectUnread(t *testing.T) {
	b, _ := memFolder(t, "p/")
	if err := b.Write(context.Background(), "x.json", func(w io.Writer) error { _, err := w.Write(make([]byte, 100)); return err }); err != nil {
		t.Fatal(err)
	}
	var tooLarge *regfile.TooLargeError
	if _, err := b.ReadAll(context.Background(), "x.json", 10); !errors.As(err, &tooLarge) {
		t.Errorf("ReadAll of a 100-byte object with a limit of 10: %v", err)
	}
}
