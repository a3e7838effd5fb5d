package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/runtime"
)

// Models by name. Every command's --model accepts a registry name
// (`segtune model list`) as well as a path: resolveModelFlags wraps the
// commands so that the flag holds the file's path by the time they run.

// resolveModelFlags makes the --model flag of every command in cmds (and
// their subcommands) accept a known model's name: a Before hook replaces
// the name by the model's file (resolveModelArg).
func resolveModelFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		resolveModelFlags(cmd.Subcommands)
		var flag *cli.StringFlag
		for _, f := range cmd.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "model" {
				flag = sf
			}
		}
		if flag == nil {
			continue
		}
		flag.Usage += " (or a known model's name, see segtune model list, or an s3://, gs:// or azblob:// URL)"
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if v := c.String("model"); v != "" {
				path, err := resolveModel(c, v)
				if err != nil {
					return err
				}
				if path != v {
					if err := c.Set("model", path); err != nil {
						return err
					}
				}
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
}

// resolveModel returns the local file of a model given as a path, a
// registry name (resolveModelArg) or a bucket URL (fetched into the
// cache): what every command's --model, and info's argument, accept.
func resolveModel(c *cli.Context, v string) (string, error) {
	if storage.IsURL(v) {
		return fetchModel(c.Context, v)
	}
	return resolveModelArg(v)
}

// resolveModelArg returns the model file that v names. A path that exists,
// or a value that is no registry name, is returned as it is (opening it
// reports what is wrong). A registry name becomes the path of its file:
// embedded models are written once to the cache (modelCacheDir), the others
// are looked for in modelDirs, and the error lists the folders searched.
func resolveModelArg(v string) (string, error) {
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
	dirs := modelDirs()
	p, err := e.Locate(dirs...)
	if err != nil {
		return "", fmt.Errorf("--model %s: looked for %s in %s and did not find it (where to get it: %s); "+
			"copy it into one of those folders or pass its path", e.Name, e.File, strings.Join(dirs, ", "), e.Location)
	}
	return p, nil
}

// sharedAssetsEnv names the folder holding the project's shared assets
// (models/, data/); internal/testassets reads the same variable.
const sharedAssetsEnv = "SEGTUNE_SHARED_ASSETS"

// modelCacheDir is segtune's cache folder for models: models/ beside the
// ONNX Runtime copy that `make ort` installs ($SEGTUNE_CACHE_DIR, else
// $XDG_CACHE_HOME/segtune, else ~/.cache/segtune).
func modelCacheDir() string {
	// CachedLibraryPath is ROOT/onnxruntime/VERSION/libonnxruntime.so.1.
	root := filepath.Dir(filepath.Dir(filepath.Dir(runtime.CachedLibraryPath())))
	return filepath.Join(root, "models")
}

// modelDirs are the folders searched for a known model's file, in order:
// $SEGTUNE_SHARED_ASSETS/models, the model cache, and shared/assets/models
// in the working directory and each of its parents (the project keeps its
// shared assets beside the repository).
func modelDirs() []string {
	var dirs []string
	if d := os.Getenv(sharedAssetsEnv); d != "" {
		dirs = append(dirs, filepath.Join(d, "models"))
	}
	dirs = append(dirs, modelCacheDir())
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
	p := filepath.Join(modelCacheDir(), e.File)
	atomicfile.ClearCacheEntry(p)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == e.Size() {
		if d, err := regfile.SHA256(p); err == nil && d == e.Digest() {
			return p, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("--model %s: %w", e.Name, err)
	}
	if err := atomicfile.Write(p, models.SynthModel, 0o644); err != nil {
		return "", fmt.Errorf("--model %s: %w", e.Name, err)
	}
	return p, nil
}

// settingsLayer is one source of a model's settings: what it says and
// where it was read.
type settingsLayer struct {
	from  string
	side  imageio.Sidecar
	known *models.Entry // the registry's entry, for its layer
}

// metadataLayer names the settings a model file carries in itself.
const metadataLayer = "metadata_props " + imageio.ContractKey

// modelLayers reads the settings a model file brings with it, lowest
// precedence first: the registry's, when the file's SHA-256 is a known
// model's (wherever it lives and whatever it is called); those the file
// carries in its metadata_props (imageio.ContractKey); its sidecar
// MODEL.segtune.json. Unusable metadata is not a layer: it comes back as
// metaErr for the caller to report, so that the sidecar, flags or a new
// export can still take its place. A missing file, or one that is not a
// regular file, has no layers (opening the model reports it).
func modelLayers(modelPath string) (layers []settingsLayer, metaErr error, err error) {
	e, known, err := models.Recognize(modelPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	if known {
		layers = append(layers, settingsLayer{from: "registry (" + e.Name + ")", side: e.Sidecar(), known: &e})
	}
	meta, found, err := models.EmbeddedSettings(modelPath)
	switch {
	case found:
		layers = append(layers, settingsLayer{from: metadataLayer, side: *meta})
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, regfile.ErrNotRegular):
		metaErr = err
	}
	side, found, err := imageio.LoadModelSidecar(modelPath)
	if err != nil {
		return nil, nil, err
	}
	if found {
		layers = append(layers, settingsLayer{from: imageio.SidecarPath(modelPath), side: *side})
	}
	return layers, metaErr, nil
}

// mergeLayers merges settings layers, later ones taking precedence.
func mergeLayers(layers []settingsLayer) imageio.Sidecar {
	s := imageio.Sidecar{Version: imageio.SidecarVersion}
	for _, l := range layers {
		s = s.Merge(l.side)
	}
	return s
}

// settingsOrigins names, for each part of the merged settings, the layer
// it comes from (the last that sets it); a part no layer sets is absent.
func settingsOrigins(layers []settingsLayer) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		s := l.side
		for part, set := range map[string]bool{
			"preprocess": s.Preprocess != nil, "classes": s.Classes != nil, "palette": s.Palette != nil,
			"label_map": s.LabelMap != nil, "ignore_label": s.IgnoreLabel != nil, "output": s.Output != nil,
		} {
			if set {
				out[part] = l.from
			}
		}
	}
	return out
}

// warnMetadata says, whatever --quiet, that a model's embedded settings
// were unusable and are ignored.
func warnMetadata(err error) {
	fmt.Fprintf(os.Stderr, "segtune: warning: %v; ignoring the model's embedded settings (a sidecar or flags set them; "+
		"`segtune export` writes them anew)\n", err)
}

// knownModelSettings returns the settings a model file brings with it
// (modelLayers, merged), with one notice per source used. A model with
// none, run without --preprocess or preprocessing flags, gets one notice
// naming the defaults assumed.
func knownModelSettings(c *cli.Context, modelPath string) (imageio.Sidecar, error) {
	layers, metaErr, err := modelLayers(modelPath)
	if err != nil {
		return imageio.Sidecar{}, err
	}
	if metaErr != nil {
		warnMetadata(metaErr)
	}
	for _, l := range layers {
		switch {
		case l.known != nil:
			e := l.known
			hint := ""
			if lm := e.LabelMaps["camvid"]; lm != "" {
				hint = fmt.Sprintf(" (CamVid masks: --label-map '%s')", lm)
			}
			notef(c, "segtune: %s is %s (recognised by its SHA-256): using its preprocessing, classes and palette%s", modelPath, e.Name, hint)
		case l.from == metadataLayer:
			notef(c, "segtune: using the settings %s carries (%s)", modelPath, l.from)
		default:
			notef(c, "segtune: using settings from %s", l.from)
		}
	}
	if len(layers) == 0 && !preprocessingGiven(c) {
		notef(c, "segtune: %s is not a known model and has no sidecar nor embedded settings (metadata_props %s): assuming RGB, raw 0..255 values, "+
			"the layout its graph shows (`segtune info`), at the model's fixed input size or else each image's own; "+
			"set --value-scale/--value-offset or --mean/--std (and --size, --scale, --bgr, --nhwc), --preprocess FILE, or write %s",
			modelPath, imageio.ContractKey, imageio.SidecarPath(modelPath))
	}
	return mergeLayers(layers), nil
}

// preprocessingGiven reports whether --preprocess or any preprocessing flag
// was set on the command line.
func preprocessingGiven(c *cli.Context) bool {
	for _, f := range preprocessFlags() {
		for _, name := range f.Names() {
			if c.IsSet(name) {
				return true
			}
		}
	}
	return false
}
