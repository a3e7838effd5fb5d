package evaluate

import (
	"context"
	"io"

	"github.com/segtune/segtune/internal/storage"
)

// ReadPartial reads and checks the partial file at location (a path or a
// bucket URL). A missing file is an error storage.IsNotExist recognises;
// a file that is not a valid partial an *PartialError.
func ReadPartial(ctx context.Context, location string) (*Partial, error) {
	f, name, err := storage.OpenFile(ctx, location)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := f.ReadAll(ctx, name, MaxPartialBytes)
	if err != nil {
		return nil, err
	}
	return ParsePartial(data, location)
}

// WritePartial writes p to location (a path or a bucket URL) atomically,
// creating a local file's folder.
func WritePartial(ctx context.Context, location string, p *Partial) error {
	data, err := p.Encode()
	if err != nil {
		return err
	}
	f, name, err := storage.OpenFile(ctx, location)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.MkdirAll(); err != nil {
		return err
	}
	return f.Write(ctx, name, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// Merge reads the partial files of every shard of one evaluation
// (locations: paths or bucket URLs) and combines them into the partial of
// the whole set, whose Summary is exactly the report of one run over
// every image (its seconds the shards' total).
func Merge(ctx context.Context, locations []string) (*Partial, error) {
	parts := make([]*Partial, 0, len(locations))
	for _, v := range locations {
		p, err := ReadPartial(ctx, v)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return MergePartials(parts, locations)
}
