// Package demo is the workflow of `segtune demo`: a harder draw of the
// synthetic world, the built-in model written beside it, the two
// fine-tunes (baseline and size regularizer) that differ only in the
// regularizer, each summarised as a row of the demo's table, and the
// verdict on the regularizer from the models' paired per-image IoU.
// RunAll runs it all.
package demo
