package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/onnx"
)

// Models and training data in object storage are copied into the cache
// (beside models/: remote/HASH/, HASH being of the URL as given), where
// every command then reads them as local files. The folder is stable for
// a URL, so `finetune --resume` finds the run's data and model where the
// first run recorded them, and a copy that matches the object (size,
// modification time, MD5 where the store gives one) is not fetched again.

// RemoteCacheDir is the local folder that mirrors the URL v.
func RemoteCacheDir(v string) string {
	sum := sha256.Sum256([]byte(v))
	return filepath.Join(filepath.Dir(CacheDir()), "remote", hex.EncodeToString(sum[:8]))
}

// Fetch copies the model that the URL v names into the cache with its
// sidecar (NAME.segtune.json beside it, if there is one) and the
// external-data files it refers to, and returns its local path. Its
// errors are *FetchError.
func Fetch(ctx context.Context, v string) (string, error) {
	fail := func(err error) (string, error) { return "", &FetchError{URL: v, Err: err} }
	f, name, err := storage.OpenFile(ctx, v)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if f.IsLocal() { // file://
		return f.Path(name), nil
	}
	dir := RemoteCacheDir(v)
	dst := filepath.Join(dir, name)
	if _, err := f.Fetch(ctx, name, dst); err != nil {
		return fail(err)
	}
	side := strings.TrimSuffix(name, path.Ext(name)) + imageio.SidecarExt
	ok, err := f.Exists(ctx, side)
	if err != nil {
		return fail(err)
	}
	if ok {
		if _, err := f.Fetch(ctx, side, filepath.Join(dir, side)); err != nil {
			return fail(err)
		}
	} else {
		os.Remove(filepath.Join(dir, side)) // the cache's own copy of a sidecar since removed
	}
	if IsCheckpoint(dst) {
		return dst, nil
	}
	data, err := regfile.ReadSmall(dst, onnx.MaxModelBytes)
	if err != nil {
		return fail(err)
	}
	locs, err := onnx.ExternalLocations(data)
	if err != nil {
		return dst, nil // onnx.Load explains what is wrong with the file
	}
	for _, loc := range locs {
		rel := filepath.FromSlash(loc)
		if !filepath.IsLocal(rel) {
			return fail(fmt.Errorf("external data %q leaves the model's folder", loc))
		}
		if _, err := f.Fetch(ctx, path.Clean(loc), filepath.Join(dir, rel)); err != nil {
			return fail(fmt.Errorf("external data %q: %w", loc, err))
		}
	}
	return dst, nil
}

// Mirror is a folder of images as MirrorFolder left it.
type Mirror struct {
	// Dir is the local folder: the cache's copy, or the folder itself
	// for a local one (file:// or a path), when Remote is false.
	Dir    string
	Remote bool
	// Source names the bucket folder; Images, Fetched and Removed count
	// the images in the copy, those fetched now and the stale ones
	// removed.
	Source                   string
	Images, Fetched, Removed int
}

// FolderError is a bucket folder that could not be mirrored.
type FolderError struct {
	Folder string
	Err    error
}

func (e *FolderError) Error() string { return e.Folder + ": " + e.Err.Error() }
func (e *FolderError) Unwrap() error { return e.Err }

// mirrorWorkers is how many objects MirrorFolder fetches at once.
const mirrorWorkers = 8

// MirrorFolder copies the image files under the bucket folder v
// (sub-folders included) into the cache (RemoteCacheDir); files there
// that are no longer in the bucket are removed, so the copy is the folder
// as it is now. Errors about the folder are *FolderError.
func MirrorFolder(ctx context.Context, v string) (Mirror, error) {
	f, err := storage.OpenFolder(ctx, v)
	if err != nil {
		return Mirror{}, &FolderError{Folder: v, Err: err}
	}
	defer f.Close()
	if f.IsLocal() {
		return Mirror{Dir: f.Location().Local}, nil
	}
	m := Mirror{Dir: RemoteCacheDir(v), Remote: true, Source: f.String()}
	if err := f.CheckList(ctx); err != nil {
		return Mirror{}, &FolderError{Folder: m.Source, Err: err}
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return Mirror{}, err
	}
	seen, err := m.fetchImages(ctx, f)
	if err != nil {
		return Mirror{}, &FolderError{Folder: m.Source, Err: err}
	}
	m.Images = len(seen)
	filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, _ := filepath.Rel(m.Dir, p); !seen[rel] && os.Remove(p) == nil {
			m.Removed++
		}
		return nil
	})
	return m, nil
}

// fetchImages fetches every image under f into m.Dir, mirrorWorkers at a
// time, counting those fetched, and returns the set of images listed (by
// local relative path).
func (m *Mirror) fetchImages(ctx context.Context, f *storage.Folder) (map[string]bool, error) {
	seen := map[string]bool{}
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < mirrorWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range jobs {
				did, err := f.Fetch(ctx, name, filepath.Join(m.Dir, filepath.FromSlash(name)))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if did {
					m.Fetched++
				}
				mu.Unlock()
			}
		}()
	}
	var listErr error
	for o, err := range f.Walk(ctx) {
		if err != nil {
			listErr = err
			break
		}
		if !imageio.IsImageFile(o.Name) {
			continue
		}
		rel := filepath.FromSlash(o.Name)
		if !filepath.IsLocal(rel) {
			listErr = fmt.Errorf("object %s: its key leaves the folder", f.Path(o.Name))
			break
		}
		seen[rel] = true
		jobs <- o.Name
	}
	close(jobs)
	wg.Wait()
	if listErr == nil {
		listErr = firstErr
	}
	return seen, listErr
}
