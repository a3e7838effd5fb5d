// Package evaluate scores a segmentation model on labelled images: it
// pairs images with their masks (SamplePairs for local pairs,
// FolderPairs for two folders or buckets streamed side by side), runs the
// model over the pairs (Run), scores each prediction against its mask
// with metrics' confusion matrix, and keeps one shard's scores in a
// Partial, whose Summary is the report. Merge combines the partial files
// of every shard of a sharded evaluation into the report one run over
// every image gives (metrics.PairedMeanIoU compares two models image
// by image).
//
// A Go program fills a Request, whose Plan pairs the data and opens the
// model (or builds a Plan itself: pairs, NewSetup, Plan.ReadFolders),
// calls Run and prints or stores the partial (Summary.WriteText,
// WritePartial). A Job is the whole of `segtune eval` after its flags:
// Settings.Open checks the settings and opens the labelled data, Job.Run
// plans, resumes or refuses an existing partial file, scores and reports;
// what a user got wrong is a usage error (setting.Usage) naming the setting by its key.
package evaluate
