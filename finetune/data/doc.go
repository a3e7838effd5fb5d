// Package data is the training-data side of segtune finetune: it opens a
// segmentation data set (images paired with label masks), validates and
// caches it, computes per-example class statistics, and produces
// augmented, normalised batches for the training graph.
//
// # Data sets
//
// [ResolveSplit] finds the image and mask folders of a split in the usual
// layouts (root/images/train + root/masks/train, with annotations/ or
// labels/ for masks and training/validation as split names); [Open] pairs
// the files by name, decodes every image and mask once in parallel,
// remaps the masks through a [imageio.LabelMap] and checks sizes and label
// ranges, failing with an error that names the file, or, with
// [Config.SkipBad], skipping the example and reporting a [Problem].
// Decoded pixels (packed RGB and uint8 labels) stay in memory within
// [Config.CacheBytes]; examples beyond the budget are decoded again when
// used. Example ids are indices 0..Len()-1 into the kept examples sorted
// by image name.
//
// # Batches and determinism
//
// A [Loader] produces [Batch]es ahead of the consumer on a pool of
// workers. Every random choice is derived from (seed, epoch, position in
// the epoch) by hashing, never from a shared generator, so the bytes of
// every batch depend only on those numbers and the data set, not on
// goroutine scheduling or the number of workers. The epoch's order is a
// seeded permutation (or the caller's [LoaderConfig.Order]); example k of
// the order gets its own PCG generator for scale, crop offset and flip.
//
// Resuming: the whole loader state is (Seed, epoch, step), where step
// counts the batches already produced in that epoch. A loader created with
// StartEpoch/StartStep set to a checkpoint's [Loader.Position] yields
// exactly the batches an uninterrupted run would have yielded from there
// (with the same data set, configuration and Order function).
package data
