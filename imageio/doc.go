// Package imageio moves pixels between files and tensors for segtune:
// decoding images (PNG, JPEG, GIF, BMP, TIFF, WebP) with a decompression-bomb
// guard, turning them into float32 model inputs as described by a
// data-driven [Preprocess], reading and remapping label masks, writing
// palette masks and overlays atomically, mapping model outputs back to the
// original image size, and pairing images with masks in data set folders.
//
// A model's preprocessing, class names, palette and label map live in a JSON
// sidecar next to it (model.onnx → model.segtune.json), see [Sidecar].
package imageio
