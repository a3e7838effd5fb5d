package resolve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/hub"
	"github.com/segtune/segtune/runtime"
)

// SharedAssetsEnv names the folder holding the project's shared assets
// (models/, data/); internal/testassets reads the same variable.
const SharedAssetsEnv = "SEGTUNE_SHARED_ASSETS"

// NotFoundError is a known model whose file is in none of the folders
// searched.
type NotFoundError struct {
	Entry models.Entry
	Dirs  []string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s: looked for %s in %s and did not find it (where to get it: %s); "+
		"copy it into one of those folders or pass its path", e.Entry.Name, e.Entry.File, strings.Join(e.Dirs, ", "), e.Entry.Location)
}

// FetchError is a bucket model that could not be copied into the cache.
type FetchError struct {
	URL string
	Err error
}

func (e *FetchError) Error() string { return e.URL + ": " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// ExitCode is the status a program exits with: 2, the model asked for is
// not there to be had (a URL, credentials, the cache offline).
func (e *FetchError) ExitCode() int { return 2 }

// Model returns the local file of a model given as a path, a known
// model's name (Local), a Hub reference, a Hub catalogue name or an
// https URL (Download), or a bucket URL (Fetch): what the setting model
// accepts, and its errors name it ("{model} v: why").
func Model(ctx context.Context, v string) (string, error) {
	path, err := model(ctx, v)
	if err != nil {
		return "", setting.Messagef("{model} %w", err)
	}
	return path, nil
}

func model(ctx context.Context, v string) (string, error) {
	if _, err := os.Stat(v); err != nil && IsRemoteModel(v) {
		r, err := Download(ctx, v)
		if err != nil {
			return "", err
		}
		return r.Path, nil
	}
	if storage.IsURL(v) {
		return Fetch(ctx, v)
	}
	return Local(v)
}

// Local returns the model file that v names. A path that exists, or a
// value that is no known model's name, is returned as it is (opening it
// reports what is wrong). A known model's name becomes the path of its
// file: embedded models are written once to the cache (CacheDir), the
// others are looked for in SearchDirs; a *NotFoundError lists the folders
// searched. Other errors name the model.
func Local(v string) (string, error) {
	if _, err := os.Stat(v); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	e, err := models.Lookup(v)
	if err != nil {
		return v, nil
	}
	if e.Embedded && e.Name == models.SynthName {
		return cacheEmbedded(e)
	}
	dirs := SearchDirs()
	p, err := e.Locate(dirs...)
	if err != nil {
		return "", &NotFoundError{Entry: e, Dirs: dirs}
	}
	return p, nil
}

// CacheDir is segtune's cache folder for models: models/ beside the ONNX
// Runtime copy that `make ort` installs ($SEGTUNE_CACHE_DIR, else
// $XDG_CACHE_HOME/segtune, else ~/.cache/segtune).
func CacheDir() string {
	// CachedLibraryPath is ROOT/onnxruntime/VERSION/libonnxruntime.so.1.
	root := filepath.Dir(filepath.Dir(filepath.Dir(runtime.CachedLibraryPath())))
	return filepath.Join(root, "models")
}

// SearchDirs are the folders searched for a known model's file, in order:
// $SEGTUNE_SHARED_ASSETS/models, the model cache, and shared/assets/models
// in the working directory and each of its parents (the project keeps its
// shared assets beside the repository).
func SearchDirs() []string {
	var dirs []string
	if d := os.Getenv(SharedAssetsEnv); d != "" {
		dirs = append(dirs, filepath.Join(d, "models"))
	}
	dirs = append(dirs, CacheDir())
	if wd, err := getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if st, err := os.Stat(filepath.Join(dir, "shared", "assets", "models")); err == nil && st.IsDir() {
				dirs = append(dirs, filepath.Join(dir, "shared", "assets", "models"))
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return dirs
}

// getwd is os.Getwd; tests replace it to control the upward search.
var getwd = os.Getwd

// cacheEmbedded writes the embedded model to the cache, unless an intact
// copy is already there, and returns its path. The cache is segtune's:
// an entry that is not a regular file of the model's size and SHA-256 is
// discarded and written again. A link, a FIFO or a device there is
// removed itself, never opened or written through.
func cacheEmbedded(e models.Entry) (string, error) {
	p := filepath.Join(CacheDir(), e.File)
	atomicfile.ClearCacheEntry(p)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == e.Size() {
		if d, err := regfile.SHA256(p); err == nil && d == e.Digest() {
			return p, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", e.Name, err)
	}
	if err := atomicfile.Write(p, models.SynthModel, 0o644); err != nil {
		return "", fmt.Errorf("%s: %w", e.Name, err)
	}
	return p, nil
}

// WriteModelList writes the registry of known models as a table: name,
// input size, classes, and the file found for it (else where to get it).
func WriteModelList(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tinput\tclasses\twhere")
	dirs := SearchDirs()
	for _, e := range models.Known() {
		size := fmt.Sprintf("%dx%d", e.Height, e.Width)
		if e.Dynamic {
			size += " (any)"
		}
		where := e.Location
		if p, err := e.Locate(dirs...); err == nil && !e.Embedded {
			where = p
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", e.Name, size, e.Classes, where)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeHubList(w)
}

// writeHubList writes the Hub catalogue (name, reference, classes,
// licence, checksum, whether cached) and the other models the download
// cache holds.
func writeHubList(w io.Writer) error {
	cached, err := hub.Cached(HubCacheDir())
	if err != nil {
		return err
	}
	isCached := map[string]string{}
	for _, p := range cached {
		isCached["hf:"+p.Repo+"/"+p.File+"@"+p.Commit] = p.SHA256
	}
	fmt.Fprintf(w, "\nFrom the Hugging Face Hub (downloaded on first use into %s):\n", HubCacheDir())
	listed := map[string]bool{}
	for _, e := range models.Catalogue() {
		sum, ok := isCached[e.Ref()]
		listed[e.Ref()] = true
		state := "not cached"
		if ok {
			state = "cached"
		}
		switch {
		case e.SHA256 != "":
			sum = e.SHA256
		case sum == "":
			sum = "recorded on first download"
		}
		fmt.Fprintf(w, "%s  %s  (%s)\n    %s; %s classes; licence %s; sha256 %s\n", e.Name, e.Ref(), state, e.Task, e.Classes, e.Licence, sum)
	}
	var others []string
	for _, p := range cached {
		if p.Repo == "" {
			others = append(others, fmt.Sprintf("%s  sha256 %s", p.URL, p.SHA256))
		} else if ref := "hf:" + p.Repo + "/" + p.File + "@" + p.Commit; !listed[ref] {
			others = append(others, fmt.Sprintf("%s (as %s)  sha256 %s", ref, p.Source, p.SHA256))
		}
	}
	if len(others) > 0 {
		fmt.Fprintln(w, "\nAlso in the download cache:")
		for _, o := range others {
			fmt.Fprintln(w, "  "+o)
		}
	}
	return nil
}
