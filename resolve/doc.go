// Package resolve turns what a user names as a model (a path, a known
// model's name, a checkpoint, an s3://, gs:// or azblob:// URL) into a
// local file and reads what that file brings with it: its settings
// layers (registry, metadata_props, sidecar), its contract and a
// description of it.
//
// Known models and bucket objects are kept in segtune's cache folder
// (CacheDir): embedded models are written there once, bucket models and
// data folders are mirrored under remote/HASH beside it.
package resolve
