// Package evaluate scores a segmentation model on labelled images: it
// pairs images with their masks (local folders, a data set's split, or
// two bucket folders streamed side by side), runs the model over the
// pairs, scores each prediction against its mask with metrics' confusion
// matrix, and keeps one shard's scores in a Partial, whose Summary is the
// report. Merge combines the partial files of every shard of a sharded
// evaluation into the report one run over every image gives.
//
// A Go program evaluates with Pairs (or its own pairs), NewSetup and Run,
// and prints or stores the partial's Summary (WriteText, WritePartial);
// `segtune eval` is flag parsing and printing around them.
package evaluate
