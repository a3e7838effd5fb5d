// Package history records the metrics of a fine-tuning run as JSON lines,
// reads them back, plots training curves to PNG and prints summary tables.
//
// Each line of a run's metrics.jsonl is one Record: a JSON object with the
// fields kind ("step", "epoch", or "base" for the base model's validation), epoch, step and loss, optionally lr,
// seconds and images_per_s, and any number of extra numeric fields such as
// val_miou or val_iou_person. NaN and infinities, which JSON lacks, are
// written as the strings "NaN", "Inf" and "-Inf", so a diverging loss is
// recorded as such. The file is append-only; a resumed run first cuts the
// records written after its checkpoint (finetune rewrites the file) and
// then appends, so no record is ever superseded.
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/segtune/segtune/internal/regfile"
)

// Record kinds.
const (
	KindStep  = "step"  // one optimiser step (or an average over a few)
	KindEpoch = "epoch" // the end of an epoch, usually with validation metrics
	// KindBase is the base model's validation before the first step:
	// epoch -1 (people see epoch 0), step 0, no loss (reads back as NaN:
	// the base was not trained), and the validation fields of an epoch
	// record. It is the reference
	// the trained epochs are compared with.
	KindBase = "base"
)

// Record is one line of the metrics log.
type Record struct {
	Kind         string  // KindStep, KindEpoch or KindBase
	Epoch        int64   // epoch index from 0 (people see Epoch+1)
	Step         int64   // optimiser steps completed
	Loss         float64 // training loss (mean over the epoch for epoch records)
	LR           float64 // learning rate; omitted from the line when 0
	Seconds      float64 // duration of the step or epoch; omitted when 0
	ImagesPerSec float64 // throughput; omitted when 0
	// Extra holds further numeric fields, such as "val_miou". Their names
	// must differ from the fields above.
	Extra map[string]float64
}

// coreFields are the JSON names of Record's fixed fields.
var coreFields = map[string]bool{
	"kind": true, "epoch": true, "step": true, "loss": true,
	"lr": true, "seconds": true, "images_per_s": true,
}

// Value returns the named field of r: a core field by its JSON name
// ("loss", "lr", ...) or an extra one, and whether it is present.
func (r *Record) Value(name string) (float64, bool) {
	switch name {
	case "epoch":
		return float64(r.Epoch), true
	case "step":
		return float64(r.Step), true
	case "loss":
		return r.Loss, true
	case "lr":
		return r.LR, true
	case "seconds":
		return r.Seconds, true
	case "images_per_s":
		return r.ImagesPerSec, true
	}
	v, ok := r.Extra[name]
	return v, ok
}

// namedValue is one numeric field of a record.
type namedValue struct {
	name string
	v    float64
}

// numbers are r's numeric core fields as its line holds them, in order:
// loss always (but for a base record, which has none), lr, seconds and
// images_per_s when they are not 0.
func (r Record) numbers() []namedValue {
	var out []namedValue
	if r.Kind != KindBase {
		out = append(out, namedValue{"loss", r.Loss})
	}
	for _, f := range []namedValue{{"lr", r.LR}, {"seconds", r.Seconds}, {"images_per_s", r.ImagesPerSec}} {
		if f.v != 0 {
			out = append(out, f)
		}
	}
	return out
}

// MarshalJSON encodes r as one flat JSON object: the core fields in a
// fixed order, then the extra fields sorted by name.
func (r Record) MarshalJSON() ([]byte, error) {
	if r.Kind == "" {
		return nil, errors.New("history: record has no kind")
	}
	b := make([]byte, 0, 128+32*len(r.Extra))
	b = append(b, `{"kind":`...)
	b = strconv.AppendQuote(b, r.Kind)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, r.Epoch, 10)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, r.Step, 10)
	for _, f := range r.numbers() {
		b = appendField(b, f.name, f.v)
	}
	keys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		if coreFields[k] || k == "" {
			return nil, fmt.Errorf("history: extra field %q clashes with a record field", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendField(b, k, r.Extra[k])
	}
	return append(b, '}'), nil
}

func appendField(b []byte, name string, v float64) []byte {
	b = append(b, ',')
	key, _ := json.Marshal(name) // a string always marshals
	b = append(b, key...)
	b = append(b, ':')
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	// The shortest representation that parses back to the same float64.
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// UnmarshalJSON decodes a flat JSON object written by MarshalJSON. Fields
// that are neither numbers, null nor the non-finite strings (for example
// a string added by another tool) are ignored.
func (r *Record) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*r = Record{}
	kind, ok := raw["kind"]
	if !ok {
		return errors.New(`no "kind" field`)
	}
	if err := json.Unmarshal(kind, &r.Kind); err != nil {
		return fmt.Errorf("kind: %v", err)
	}
	if r.Kind == KindBase {
		r.Loss = math.NaN() // a base record has no training loss
	}
	for k, v := range raw {
		if k == "kind" {
			continue
		}
		x, ok := number(v)
		if !ok {
			if coreFields[k] {
				return fmt.Errorf("%s: not a number: %s", k, v)
			}
			continue
		}
		switch k {
		case "epoch", "step":
			if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				return fmt.Errorf("%s: not a whole number: %s", k, v)
			}
			if k == "epoch" {
				r.Epoch = int64(x)
			} else {
				r.Step = int64(x)
			}
		case "loss":
			r.Loss = x
		case "lr":
			r.LR = x
		case "seconds":
			r.Seconds = x
		case "images_per_s":
			r.ImagesPerSec = x
		default:
			if r.Extra == nil {
				r.Extra = make(map[string]float64)
			}
			r.Extra[k] = x
		}
	}
	return nil
}

// number parses a JSON number or one of the non-finite spellings; null
// reads as NaN (a missing value).
func number(v json.RawMessage) (float64, bool) {
	v = bytes.TrimSpace(v)
	switch string(v) {
	case `"NaN"`, "null":
		return math.NaN(), true
	case `"Inf"`, `"+Inf"`, `"Infinity"`:
		return math.Inf(1), true
	case `"-Inf"`, `"-Infinity"`:
		return math.Inf(-1), true
	}
	if len(v) == 0 || v[0] == '"' || v[0] == '{' || v[0] == '[' || v[0] == 't' || v[0] == 'f' {
		return 0, false
	}
	x, err := strconv.ParseFloat(string(v), 64)
	return x, err == nil
}

// Writer appends records to a metrics file.
type Writer struct {
	f    *os.File
	path string
	buf  []byte
	tb   *TensorBoard // also written, when set (Tee)
}

// Open opens path for appending records, creating it if needed. If the
// file ends in a partial line (a crash mid-write), Open first ends that
// line, so the next record starts on a line of its own; readers skip the
// partial line.
func Open(path string) (*Writer, error) {
	// No symbolic link is followed and only a regular file is appended
	// to: a link planted at metrics.jsonl would make every step append
	// to a file outside the run folder.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("history: %s is a symbolic link: refusing to write through it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("history: %s is not a regular file", path)
	}
	w := &Writer{f: f, path: path}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
			f.Close()
			return nil, fmt.Errorf("history: %s: %w", path, err)
		}
		if last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, fmt.Errorf("history: %s: %w", path, err)
			}
		}
	}
	return w, nil
}

// Discard returns a Writer that writes nothing: the history of a rank of a
// data-parallel run other than rank 0, which writes the file.
func Discard() *Writer { return &Writer{path: os.DevNull} }

// Path returns the file's path.
func (w *Writer) Path() string { return w.path }

// Write appends r as one line with a single write call, so a crash leaves
// at most a partial last line.
func (w *Writer) Write(r Record) error {
	if w.f == nil {
		return nil
	}
	line, err := r.MarshalJSON()
	if err != nil {
		return fmt.Errorf("history: %s: %w", w.path, err)
	}
	w.buf = append(append(w.buf[:0], line...), '\n')
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("history: %s: %w", w.path, err)
	}
	if w.tb != nil {
		return w.tb.Write(r)
	}
	return nil
}

// Sync commits the file to stable storage.
func (w *Writer) Sync() error {
	if w.f == nil {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("history: %s: %w", w.path, err)
	}
	return nil
}

// Close syncs and closes the file.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	serr := w.f.Sync()
	if w.tb != nil {
		if err := w.tb.Close(); err != nil && serr == nil {
			serr = err
		}
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("history: %s: %w", w.path, err)
	}
	if serr != nil {
		return fmt.Errorf("history: %s: %w", w.path, serr)
	}
	return nil
}

// Read reads all records of the metrics file at path. See Decode.
func Read(path string) ([]Record, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	recs, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("history: %s, %w", path, err)
	}
	return recs, nil
}

// Decode reads records, one JSON object a line, from r. Blank lines and a
// final line without a newline that does not parse (a write cut short)
// are skipped; any other malformed line is an error naming its number.
func Decode(r io.Reader) ([]Record, error) {
	br := bufio.NewReader(r)
	var recs []Record
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return recs, fmt.Errorf("line %d: %w", n, err)
		}
		complete := err == nil
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var rec Record
			if perr := json.Unmarshal(t, &rec); perr != nil {
				if !complete {
					break // partial last line
				}
				return recs, fmt.Errorf("line %d: %v", n, perr)
			}
			recs = append(recs, rec)
		}
		if !complete {
			break
		}
	}
	return recs, nil
}

// Filter returns the records of the given kind, in order.
func Filter(recs []Record, kind string) []Record {
	var out []Record
	for _, r := range recs {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}
