// Package demo is the workflow of `segtune demo`: a harder draw of the
// synthetic world, the built-in model written beside it, and the two
// fine-tunes (baseline and size regularizer) that differ only in the
// regularizer, each summarised as a row of the demo's table.
package demo
