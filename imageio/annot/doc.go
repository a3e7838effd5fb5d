// Package annot decodes the annotation files that labelling tools and
// public data sets write into class-index masks, so that a data set
// folder can be read like a folder of single-channel masks:
//
//   - COCO JSON, instances and stuff ([ReadCOCO]): polygons, compressed
//     and uncompressed RLE, rasterised exactly as COCO's reference
//     (pycocotools' maskApi.c) does;
//   - CVAT "Segmentation mask 1.1" exports ([ReadCVAT]): RGB colour masks
//     in SegmentationClass/ and the colours in labelmap.txt;
//   - CVAT "CVAT for images 1.1" XML ([ReadCVATXML]): polygons, boxes,
//     ellipses and CVAT's mask RLE, drawn in z_order;
//   - Label Studio JSON exports with brush labels ([ReadLabelStudio]): the
//     RLE of @thi.ng/rle-pack that Label Studio stores per brush result;
//   - LabelMe JSON files, one per image ([ReadLabelMe]): polygons,
//     rectangles, circles, lines, points and bitmap masks, drawn as
//     labelme's shape_to_mask draws them with Pillow.
//
// Every decoder returns a [Set]: the class names (index i of Classes is
// class i of the masks) and one [Sample] per annotated image, with the
// image's path, its size, and [Sample.Mask], which produces the mask on
// demand: Width×Height bytes in row-major order, each a class index or
// [Ignore] (255). A caller that pairs images with masks reads Set.Samples
// in place of a mask folder and calls Mask when it needs the labels; the
// decoders check their input when the Set is made, so that bad
// annotations are named before any work starts.
//
// Wiring a layout: read the export once when the data folder is opened
// (ReadCOCO(annotationFile, COCOOptions{ImageDir: imagesFolder}),
// ReadCVAT(exportFolder, CVATOptions{}), ReadLabelStudio(exportFile,
// LabelStudioOptions{ImageDir: mediaFolder}), ReadLabelMe(jsonFiles,
// LabelMeOptions{Root: dataFolder})), report errors before
// training, take Set.Classes as the class names, pair each Sample.Image
// with Sample.Mask(), and check the decoded image's size against
// Sample.Width and Sample.Height. Errors in the annotation data are
// [*Error] (file, item, message); a CVAT colour outside labelmap.txt is an
// [*UnknownColourError].
//
// Class order. COCO: the categories sorted by id; class 0 is
// "background", the pixels no annotation covers, unless a category is
// named "background" (any case), which then takes index 0 and those
// pixels; with [COCOOptions.NoBackground] there is no background class,
// categories are 0..K−1 and uncovered pixels are Ignore (COCO-Stuff's
// convention). CVAT: the order of labelmap.txt (background first, as CVAT
// writes it); CVAT XML: "background", then <meta>'s labels. Label Studio: "background", then [LabelStudioOptions.Labels]
// when given, else the brush label names sorted; NoBackground as for COCO.
// LabelMe: labelme2voc's labels.txt ([LabelMeOptions.Labels]:
// __ignore__ is Ignore, _background_ class 0, then the rest in order),
// else _background_ then the shape labels sorted.
package annot
