package models

import "strings"

// HubEntry is a public segmenter on the Hugging Face Hub that segtune
// knows by name: `--model NAME` downloads it, pinned to Revision.
type HubEntry struct {
	Name string
	// Repo, Revision (a full commit hash) and File locate the ONNX file.
	Repo, Revision, File string
	// SHA256 of the file, when it was verified; empty: recorded on the
	// first download (and checked at every later use).
	SHA256 string
	// Size is the file size as the repository's page shows it.
	Size    string
	Licence string
	Task    string
	// Classes says how many classes and from which data set.
	Classes string
	// Source is the page the facts above were read from.
	Source string
}

// Ref is the entry's Hub reference (hf:REPO/FILE@REVISION).
func (e HubEntry) Ref() string { return "hf:" + e.Repo + "/" + e.File + "@" + e.Revision }

// catalogue holds only facts read from the repositories' own pages; the
// checksums were not, so they are recorded on first download.
var catalogue = []HubEntry{
	{
		Name: "segformer-b0-ade", Repo: "Xenova/segformer-b0-finetuned-ade-512-512",
		Revision: "1e78fb9c976ebbac92d859ef6d7aae4253da869e", File: "onnx/model.onnx", Size: "15.3 MB",
		Licence: "other (NVIDIA SegFormer licence of the base model nvidia/segformer-b0-finetuned-ade-512-512)",
		Task:    "semantic segmentation, 512x512", Classes: "150 (ADE20K)",
		Source: "https://huggingface.co/Xenova/segformer-b0-finetuned-ade-512-512/tree/1e78fb9c976ebbac92d859ef6d7aae4253da869e/onnx",
	},
	{
		Name: "mobilevit-xxs-voc", Repo: "Xenova/deeplabv3-mobilevit-xx-small",
		Revision: "bdb7dfd62f9892c863cddabcc2e1bcc98644ab20", File: "onnx/model.onnx", Size: "7.73 MB",
		Licence: "other (Apple sample code licence of the base model apple/deeplabv3-mobilevit-xx-small)",
		Task:    "semantic segmentation, 512x512 (DeepLabV3, MobileViT)", Classes: "21 (PASCAL VOC)",
		Source: "https://huggingface.co/Xenova/deeplabv3-mobilevit-xx-small/tree/bdb7dfd62f9892c863cddabcc2e1bcc98644ab20/onnx",
	},
}

// Catalogue lists the Hub segmenters segtune knows by name.
func Catalogue() []HubEntry { return append([]HubEntry(nil), catalogue...) }

// LookupHub returns the catalogue's entry called name (case-insensitive).
func LookupHub(name string) (HubEntry, bool) {
	for _, e := range catalogue {
		if strings.EqualFold(e.Name, name) {
			return e, true
		}
	}
	return HubEntry{}, false
}
