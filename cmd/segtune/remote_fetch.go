package main

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

	"github.com/urfave/cli/v2"

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

// remoteCacheDir is the local folder that mirrors the URL v.
func remoteCacheDir(v string) string {
	sum := sha256.Sum256([]byte(v))
	return filepath.Join(filepath.Dir(modelCacheDir()), "remote", hex.EncodeToString(sum[:8]))
}

// fetchModel copies the model that the URL v names into the cache with
// its sidecar (NAME.segtune.json beside it, if there is one) and the
// external-data files it refers to, and returns its local path.
func fetchModel(ctx context.Context, v string) (string, error) {
	fail := func(err error) (string, error) { return "", cli.Exit(fmt.Sprintf("--model %s: %v", v, err), 2) }
	f, name, err := storage.OpenFile(ctx, v)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if f.IsLocal() { // file://
		return f.Path(name), nil
	}
	dir := remoteCacheDir(v)
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
	if isCheckpoint(dst) {
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

// mirrorFolder copies the image files under the bucket folder v (sub-folders
// included) into the cache and returns the local folder; files there that
// are no longer in the bucket are removed, so the copy is the folder as it
// is now. flag names the flag in errors.
func mirrorFolder(c *cli.Context, flag, v string) (string, error) {
	ctx := c.Context
	f, err := storage.OpenFolder(ctx, v)
	if err != nil {
		return "", cli.Exit(fmt.Sprintf("--%s %s: %v", flag, v, err), 2)
	}
	defer f.Close()
	if f.IsLocal() {
		return f.Location().Local, nil
	}
	if err := f.CheckList(ctx); err != nil {
		return "", flagError(flag, f, err)
	}
	dir := remoteCacheDir(v)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	var firstErr error
	fetched := 0
	jobs := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range jobs {
				did, err := f.Fetch(ctx, name, filepath.Join(dir, filepath.FromSlash(name)))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if did {
					fetched++
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
	if listErr != nil {
		return "", flagError(flag, f, listErr)
	}
	removed := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, _ := filepath.Rel(dir, p); !seen[rel] && os.Remove(p) == nil {
			removed++
		}
		return nil
	})
	notef(c, "segtune: --%s %s: %d images in %s (%d fetched, %d removed)", flag, f, len(seen), dir, fetched, removed)
	return dir, nil
}
