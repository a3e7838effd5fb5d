package evaluate

import (
	"context"
	"fmt"
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

// PartialFileError is a partial file that a shard cannot use: it cannot
// be read (Err), or it holds something other than this shard's scores
// (Conflict), which is not overwritten.
type PartialFileError struct {
	Location string
	Conflict bool
	Err      error
	problem  string
}

func (e *PartialFileError) Error() string {
	if e.Conflict {
		return e.Location + " " + e.problem
	}
	return e.Location + ": " + e.Err.Error()
}

func (e *PartialFileError) Unwrap() error { return e.Err }

// ExistingPartial looks at location before a shard's work: it returns
// the partial there when it is want's shard of want's evaluation, complete
// (the work is done: a retried worker stops there), nil when there is no
// file, and a *PartialFileError for anything else there.
func ExistingPartial(ctx context.Context, location string, want *Partial) (*Partial, error) {
	f, name, err := storage.OpenFile(ctx, location)
	if err != nil {
		return nil, &PartialFileError{Location: location, Err: err}
	}
	defer f.Close()
	if err := f.CheckAccess(ctx); err != nil {
		return nil, &PartialFileError{Location: f.String(), Err: err}
	}
	if err := f.CheckWritable(); err != nil {
		return nil, &PartialFileError{Location: location, Err: err}
	}
	data, err := f.ReadAll(ctx, name, MaxPartialBytes)
	if storage.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, &PartialFileError{Location: location, Err: err}
	}
	conflict := func(err error, format string, args ...any) error {
		return &PartialFileError{Location: location, Conflict: true, Err: err,
			problem: fmt.Sprintf(format, args...) + "; not overwriting it: remove it or choose another file"}
	}
	old, err := ParsePartial(data, location)
	if err != nil {
		return nil, conflict(err, "exists and is not this evaluation's partial file (%v)", err)
	}
	if d := old.Setup.Diff(want.Setup); d != "" {
		return nil, conflict(nil, "holds another evaluation's scores (it differs in %s)", d)
	}
	if old.Shard != want.Shard {
		return nil, &PartialFileError{Location: location, Conflict: true, problem: fmt.Sprintf(
			"holds shard %s, and this is shard %s: give each shard its own file (e.g. part-$JOB_COMPLETION_INDEX.json)", old.Shard, want.Shard)}
	}
	return old, nil
}
