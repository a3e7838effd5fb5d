package resolve

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/hub"
)

// Models from the Hugging Face Hub (hf:…), the Hub catalogue's names and
// plain https URLs are downloaded by models/hub into HubCacheDir.

// HubCacheDir is where Hub models and web downloads are kept: hub/
// beside the models/ cache folder.
func HubCacheDir() string { return filepath.Join(filepath.Dir(CacheDir()), "hub") }

// DownloadUI is how a download shows itself: a progress bar per file and
// one-line notices (waiting on another process, offline fallback).
type DownloadUI struct {
	NewBar func(name string, size, have int64) io.WriteCloser
	Note   func(string)
}

// TerminalUI shows downloads as a CLI does: a byte bar per file on the
// terminal when bars, and each notice as a "segtune: " line on notes.
func TerminalUI(notes io.Writer, bars bool) DownloadUI {
	ui := DownloadUI{Note: func(s string) { fmt.Fprintf(notes, "segtune: %s\n", s) }}
	if bars {
		ui.NewBar = progress.Bytes
	}
	return ui
}

type downloadUIKey struct{}

// WithDownloadUI returns ctx carrying ui for the downloads Model makes.
func WithDownloadUI(ctx context.Context, ui DownloadUI) context.Context {
	return context.WithValue(ctx, downloadUIKey{}, ui)
}

// IsRemoteModel reports whether v names a model that Model downloads
// from the web: a Hub reference, a catalogue name or an http(s) URL.
func IsRemoteModel(v string) bool {
	_, known := models.LookupHub(v)
	return hub.IsRef(v) || hub.IsURL(v) || known
}

// hubClient is a Hub client for the cache, configured by the environment
// (hub.FromEnv) and the context's DownloadUI.
func hubClient(ctx context.Context) (*hub.Client, error) {
	c, err := hub.FromEnv(HubCacheDir())
	if err != nil {
		return nil, err
	}
	if ui, ok := ctx.Value(downloadUIKey{}).(DownloadUI); ok {
		c.NewBar, c.Note = ui.NewBar, ui.Note
	}
	return c, nil
}

// Download returns the cached file of a Hub reference, a catalogue name
// or a web URL, downloading it first if needed (hub.Client). Its errors
// are *FetchError.
func Download(ctx context.Context, v string) (*hub.Result, error) {
	fail := func(err error) (*hub.Result, error) { return nil, &FetchError{URL: v, Err: err} }
	c, err := hubClient(ctx)
	if err != nil {
		return fail(err)
	}
	if hub.IsURL(v) {
		r, err := c.DownloadURL(ctx, v)
		if err != nil {
			return fail(err)
		}
		return r, nil
	}
	ref, entry := v, models.HubEntry{}
	if e, ok := models.LookupHub(v); ok {
		ref, entry = e.Ref(), e
	}
	parsed, err := hub.ParseRef(ref)
	if err != nil {
		return fail(err)
	}
	r, err := c.Download(ctx, parsed)
	if err != nil {
		return fail(err)
	}
	if entry.SHA256 != "" && r.Pin.SHA256 != entry.SHA256 {
		return fail(fmt.Errorf("%s has SHA-256 %s, but segtune's catalogue records %s for %s", r.Path, r.Pin.SHA256, entry.SHA256, entry.Name))
	}
	return r, nil
}
