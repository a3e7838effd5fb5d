// Package folder segments a folder of images, local or in a bucket, into
// an output folder of palette-PNG masks (and colour overlays under
// overlays/), one NAME.png per image NAME.ext.
//
// Before any work it refuses an output folder that overlaps the input,
// two images whose masks would have one name, and (for local folders) an
// output file that would be one of the images through a symbolic link.
// Its masks and overlays carry imageio.OutputMark, and a file at an
// output's name without it (an annotation mask, say) is never replaced
// unless Options.Overwrite: when images and outputs are both local
// folders, before any work; otherwise when the image's output is
// written, failing that image. A run can be one shard of a job split by
// file name, can keep outputs that already exist and check out, and
// reports the images it could not segment by name instead of stopping
// (see pipeline.Report).
//
// A program hands it a run as its user asked for it (Request: folders by
// path or URL, settings by value): Prepare opens and checks everything
// that can be refused before the model is read, Plan.Use and Plan.Run
// segment with the opened model and sum the run up.
package folder
