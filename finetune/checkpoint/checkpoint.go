// Package checkpoint saves and loads the state of a fine-tuning run: the
// trainable weights, the optimiser state, the caller's data-order and
// regulariser state, counters, configuration and the base ONNX model the
// run started from.
//
// A checkpoint is a single file, written atomically: it is written to a
// temporary file in the destination folder, synced, and renamed over the
// destination, so that a crash or SIGKILL at any moment leaves either the
// previous checkpoint or the new one, never a mix. A single file is used
// rather than a directory because POSIX renames a file over another
// atomically but cannot replace a non-empty directory in one step; it also
// lets one CRC cover everything and makes best.ckpt a hard link away.
//
// # File format (version 1)
//
// All integers are little-endian.
//
//	offset  size  field
//	0       8     magic "SEGTCKPT"
//	8       4     format version (uint32, 1)
//	12      4     metadata length M (uint32, at most MaxMetaSize)
//	16      M     metadata, JSON (see below)
//	16+M    D     data: the float32 values of every weight tensor in
//	              metadata order, then every optimiser buffer in metadata
//	              order, then the data-state bytes, then the
//	              regulariser-state bytes; no padding
//	16+M+D  4     CRC-32C (Castagnoli) of bytes [0, 16+M+D)
//	20+M+D  8     end magic "SEGTDONE"
//
// The metadata JSON object has the fields base_model, base_sha256 (hex
// SHA-256 of the base model file; optional), run_id (optional), created (RFC 3339),
// epoch, step, metrics (name → number), config (the caller's JSON),
// weights ([{name, shape}]), optimizer (null or {algorithm, step,
// buffers: [{param, slot, count}]}), data_state_bytes and
// regularizer_state_bytes. The data length D follows from it, so a
// truncated file is recognised from its size before anything is read.
package checkpoint

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strings"
	"time"

	"github.com/segtune/segtune/finetune/optim"
)

// Version is the format version this package writes and reads.
const Version = 1

// MaxMetaSize bounds the metadata section (64 MiB), so a corrupt length
// cannot make Load allocate without limit.
const MaxMetaSize = 64 << 20

// MaxTensorElements bounds the element count of one tensor.
const MaxTensorElements = 1 << 31

const (
	magic      = "SEGTCKPT"
	endMagic   = "SEGTDONE"
	headerSize = 16
	footerSize = 12
)

// Errors that Load and Read wrap, for errors.Is.
var (
	ErrTruncated = errors.New("checkpoint truncated")
	ErrBadMagic  = errors.New("not a segtune checkpoint (bad magic)")
	ErrVersion   = errors.New("unsupported checkpoint format version")
	ErrCorrupt   = errors.New("checkpoint corrupt")
	ErrNonFinite = errors.New("non-finite value")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint is the state of a fine-tuning run at one step.
type Checkpoint struct {
	// BaseModel is the path of the ONNX model the run fine-tunes; export
	// writes the refined weights back into a copy of its graph.
	BaseModel string
	// BaseSHA256 is the hex SHA-256 of the base model file's contents, so
	// that export can tell when the file at BaseModel was replaced (empty
	// in checkpoints written before it was recorded).
	BaseSHA256 string
	// RunID identifies the run that wrote the checkpoint, so that a
	// checkpoint left by another run is never taken for this run's
	// (empty in checkpoints written before it was recorded).
	RunID string
	// Epoch and Step count completed epochs and optimiser steps.
	Epoch, Step int64
	// Metrics holds the run's latest evaluation (for example val_miou);
	// Keeper picks the best checkpoint by one of them. Values must be
	// finite.
	Metrics map[string]float64
	// Config is the run's configuration as JSON (empty for none).
	Config json.RawMessage
	// Weights are the trainable tensors, in the order the caller keeps.
	Weights []Tensor
	// Optimizer is the optimiser state, or nil.
	Optimizer *optim.State
	// DataState is the caller's data-order and RNG state, opaque.
	DataState []byte
	// RegularizerState is the regulariser's state, opaque.
	RegularizerState []byte
	// Created is when the checkpoint was written (set by Write if zero).
	Created time.Time
}

// Tensor is a named float32 tensor.
type Tensor struct {
	Name  string
	Shape []int64
	Data  []float32
}

// meta is the JSON metadata section.
type meta struct {
	BaseModel        string             `json:"base_model"`
	BaseSHA256       string             `json:"base_sha256,omitempty"`
	RunID            string             `json:"run_id,omitempty"`
	Created          time.Time          `json:"created"`
	Epoch            int64              `json:"epoch"`
	Step             int64              `json:"step"`
	Metrics          map[string]float64 `json:"metrics,omitempty"`
	Config           json.RawMessage    `json:"config,omitempty"`
	Weights          []tensorMeta       `json:"weights"`
	Optimizer        *optimMeta         `json:"optimizer"`
	DataStateLen     int64              `json:"data_state_bytes"`
	RegularizerState int64              `json:"regularizer_state_bytes"`
}

type tensorMeta struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
}

type optimMeta struct {
	Algorithm optim.Algorithm `json:"algorithm"`
	Step      int64           `json:"step"`
	Buffers   []bufferMeta    `json:"buffers"`
}

type bufferMeta struct {
	Param string `json:"param"`
	Slot  string `json:"slot"`
	Count int64  `json:"count"`
}

// Validate checks that c can be saved: unique non-empty weight names,
// shapes that match the data, finite weights, optimiser buffers and
// metrics, and valid config JSON. Errors name the offending tensor.
func (c *Checkpoint) Validate() error {
	seen := make(map[string]bool, len(c.Weights))
	for _, w := range c.Weights {
		if w.Name == "" {
			return fmt.Errorf("weight with empty name")
		}
		if seen[w.Name] {
			return fmt.Errorf("weight %q appears twice", w.Name)
		}
		seen[w.Name] = true
		n, err := elements(w.Shape)
		if err != nil {
			return fmt.Errorf("weight %q: %v", w.Name, err)
		}
		if n != int64(len(w.Data)) {
			return fmt.Errorf("weight %q: shape %v needs %d values, has %d", w.Name, w.Shape, n, len(w.Data))
		}
		if err := finite(w.Data); err != nil {
			return fmt.Errorf("weight %q: %w", w.Name, err)
		}
	}
	if o := c.Optimizer; o != nil {
		for _, b := range o.Buffers {
			if err := finite(b.Data); err != nil {
				return fmt.Errorf("optimizer %s of %q: %w", b.Slot, b.Param, err)
			}
		}
	}
	for k, v := range c.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metric %q: %w %v", k, ErrNonFinite, v)
		}
	}
	if len(c.Config) > 0 && !json.Valid(c.Config) {
		return fmt.Errorf("config is not valid JSON")
	}
	if c.Epoch < 0 || c.Step < 0 {
		return fmt.Errorf("negative counters (epoch %d, step %d)", c.Epoch, c.Step)
	}
	return nil
}

func elements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > MaxTensorElements/d {
			return 0, fmt.Errorf("shape %v holds more than %d elements", shape, int64(MaxTensorElements))
		}
		n *= d
	}
	return n, nil
}

func finite(x []float32) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w %v at index %d", ErrNonFinite, v, i)
		}
	}
	return nil
}

// Write encodes c to w in the checkpoint format after validating it. It
// writes sequentially and never seeks, so w may be any stream; atomicity
// is Save's job.
func Write(w io.Writer, c *Checkpoint) error {
	_, err := write(w, c)
	return err
}

// write is Write, returning the CRC-32C it wrote in the footer.
func write(w io.Writer, c *Checkpoint) (uint32, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	m := meta{
		BaseModel:        c.BaseModel,
		BaseSHA256:       c.BaseSHA256,
		RunID:            c.RunID,
		Created:          c.Created,
		Epoch:            c.Epoch,
		Step:             c.Step,
		Metrics:          c.Metrics,
		Config:           c.Config,
		Weights:          make([]tensorMeta, len(c.Weights)),
		DataStateLen:     int64(len(c.DataState)),
		RegularizerState: int64(len(c.RegularizerState)),
	}
	if m.Created.IsZero() {
		m.Created = time.Now().UTC().Truncate(time.Millisecond)
	}
	for i, t := range c.Weights {
		m.Weights[i] = tensorMeta{t.Name, t.Shape}
	}
	if o := c.Optimizer; o != nil {
		m.Optimizer = &optimMeta{Algorithm: o.Algorithm, Step: o.Step, Buffers: make([]bufferMeta, len(o.Buffers))}
		for i, b := range o.Buffers {
			m.Optimizer.Buffers[i] = bufferMeta{b.Param, b.Slot, int64(len(b.Data))}
		}
	}
	js, err := json.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("encoding metadata: %v", err)
	}
	if len(js) > MaxMetaSize {
		return 0, fmt.Errorf("metadata is %d bytes, more than the %d allowed", len(js), MaxMetaSize)
	}

	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20)
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	binary.LittleEndian.PutUint32(hdr[8:], Version)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(js)))
	bw.Write(hdr[:])
	bw.Write(js)
	var scratch [64 << 10]byte
	for _, t := range c.Weights {
		writeFloats(bw, t.Data, scratch[:])
	}
	if o := c.Optimizer; o != nil {
		for _, b := range o.Buffers {
			writeFloats(bw, b.Data, scratch[:])
		}
	}
	bw.Write(c.DataState)
	bw.Write(c.RegularizerState)
	// bufio.Writer remembers the first error, so checking once here
	// covers every write above.
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	var ftr [footerSize]byte
	sum := crc.Sum32()
	binary.LittleEndian.PutUint32(ftr[:], sum)
	copy(ftr[4:], endMagic)
	_, err = w.Write(ftr[:])
	return sum, err
}

func writeFloats(w *bufio.Writer, x []float32, scratch []byte) {
	per := len(scratch) / 4
	for len(x) > 0 {
		n := min(len(x), per)
		for i, v := range x[:n] {
			binary.LittleEndian.PutUint32(scratch[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(scratch[:4*n]); err != nil {
			return
		}
		x = x[n:]
	}
}

// Info is a checkpoint's metadata without its tensors, as ReadInfo returns.
type Info struct {
	Version          uint32
	BaseModel        string
	BaseSHA256       string
	RunID            string
	Created          time.Time
	Epoch, Step      int64
	Metrics          map[string]float64
	Config           json.RawMessage
	Weights          []Tensor // names and shapes only; Data is nil
	Algorithm        optim.Algorithm
	Size             int64 // file size in bytes
	DataStateLen     int64
	RegularizerState int64
}

// Read decodes a checkpoint of size bytes from r and verifies it: magic,
// version, metadata, size, CRC, and that every weight and optimiser value
// is finite. It never panics on bad input; it allocates at most about size
// bytes beyond MaxMetaSize.
func Read(r io.Reader, size int64) (*Checkpoint, error) {
	crc := crc32.New(castagnoli)
	tr := io.TeeReader(r, crc)
	m, _, err := readMeta(tr, size)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{
		BaseModel:  m.BaseModel,
		BaseSHA256: m.BaseSHA256,
		RunID:      m.RunID,
		Created:    m.Created,
		Epoch:      m.Epoch,
		Step:       m.Step,
		Metrics:    m.Metrics,
		Config:     m.Config,
		Weights:    make([]Tensor, len(m.Weights)),
	}
	var scratch [64 << 10]byte
	for i, t := range m.Weights {
		n, _ := elements(t.Shape) // checked by readMeta
		c.Weights[i] = Tensor{Name: t.Name, Shape: t.Shape, Data: make([]float32, n)}
		if err := readFloats(tr, c.Weights[i].Data, scratch[:]); err != nil {
			return nil, fmt.Errorf("weight %q: %w", t.Name, err)
		}
	}
	if om := m.Optimizer; om != nil {
		c.Optimizer = &optim.State{Algorithm: om.Algorithm, Step: om.Step, Buffers: make([]optim.Buffer, len(om.Buffers))}
		for i, b := range om.Buffers {
			c.Optimizer.Buffers[i] = optim.Buffer{Param: b.Param, Slot: b.Slot, Data: make([]float32, b.Count)}
			if err := readFloats(tr, c.Optimizer.Buffers[i].Data, scratch[:]); err != nil {
				return nil, fmt.Errorf("optimizer %s of %q: %w", b.Slot, b.Param, err)
			}
		}
	}
	if c.DataState, err = readBytes(tr, m.DataStateLen); err != nil {
		return nil, fmt.Errorf("data state: %w", err)
	}
	if c.RegularizerState, err = readBytes(tr, m.RegularizerState); err != nil {
		return nil, fmt.Errorf("regularizer state: %w", err)
	}
	sum := crc.Sum32()
	var ftr [footerSize]byte
	if _, err := io.ReadFull(r, ftr[:]); err != nil {
		return nil, fmt.Errorf("footer: %w", eofIsTruncation(err))
	}
	if string(ftr[4:]) != endMagic {
		return nil, fmt.Errorf("%w: bad end marker %q", ErrCorrupt, ftr[4:])
	}
	if got := binary.LittleEndian.Uint32(ftr[:]); got != sum {
		return nil, fmt.Errorf("%w: CRC-32C is %08x, footer says %08x", ErrCorrupt, sum, got)
	}
	// The CRC covered the values, so a non-finite one was saved as such:
	// refuse it anyway, since Save never writes one.
	for _, t := range c.Weights {
		if err := finite(t.Data); err != nil {
			return nil, fmt.Errorf("weight %q: %w", t.Name, err)
		}
	}
	if c.Optimizer != nil {
		for _, b := range c.Optimizer.Buffers {
			if err := finite(b.Data); err != nil {
				return nil, fmt.Errorf("optimizer %s of %q: %w", b.Slot, b.Param, err)
			}
		}
	}
	return c, nil
}

// readMeta reads and checks the header and metadata from r, and returns
// the metadata and the length of the data section it implies, which it
// checks against size.
func readMeta(r io.Reader, size int64) (*meta, int64, error) {
	var hdr [headerSize]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		// A short file that does not even start like a checkpoint is
		// reported as such rather than as truncated.
		k := min(n, len(magic))
		if string(hdr[:k]) != magic[:k] {
			return nil, 0, ErrBadMagic
		}
		return nil, 0, fmt.Errorf("header: %w", eofIsTruncation(err))
	}
	if string(hdr[:8]) != magic {
		return nil, 0, ErrBadMagic
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != Version {
		return nil, 0, fmt.Errorf("%w %d (this build reads version %d)", ErrVersion, v, Version)
	}
	metaLen := int64(binary.LittleEndian.Uint32(hdr[12:]))
	if metaLen > MaxMetaSize {
		return nil, 0, fmt.Errorf("%w: metadata length %d exceeds %d", ErrCorrupt, metaLen, MaxMetaSize)
	}
	if headerSize+metaLen > size {
		return nil, 0, fmt.Errorf("%w: metadata needs %d bytes, file has %d", ErrTruncated, headerSize+metaLen, size)
	}
	js := make([]byte, metaLen)
	if _, err := io.ReadFull(r, js); err != nil {
		return nil, 0, fmt.Errorf("metadata: %w", eofIsTruncation(err))
	}
	var m meta
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, 0, fmt.Errorf("%w: metadata: %v", ErrCorrupt, err)
	}
	dataLen, err := m.dataLen()
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	want := headerSize + metaLen + dataLen + footerSize
	if size < want {
		return nil, 0, fmt.Errorf("%w: file has %d bytes, its header describes %d", ErrTruncated, size, want)
	}
	if size > want {
		return nil, 0, fmt.Errorf("%w: %d unexpected bytes after the end", ErrCorrupt, size-want)
	}
	return &m, dataLen, nil
}

// dataLen checks the metadata and returns the byte length of the data
// section, without overflow (each term is bounded well below 2^63/4).
func (m *meta) dataLen() (int64, error) {
	if m.Epoch < 0 || m.Step < 0 {
		return 0, fmt.Errorf("negative counters (epoch %d, step %d)", m.Epoch, m.Step)
	}
	const limit = 1 << 50 // far beyond any file, far below overflow
	var total int64
	add := func(n int64) error {
		if n < 0 || n > limit || total+n > limit {
			return fmt.Errorf("data section larger than any file")
		}
		total += n
		return nil
	}
	seen := make(map[string]bool, len(m.Weights))
	for _, t := range m.Weights {
		if t.Name == "" || seen[t.Name] {
			return 0, fmt.Errorf("weight name %q empty or repeated", t.Name)
		}
		seen[t.Name] = true
		n, err := elements(t.Shape)
		if err != nil {
			return 0, fmt.Errorf("weight %q: %v", t.Name, err)
		}
		if err := add(4 * n); err != nil {
			return 0, err
		}
	}
	if o := m.Optimizer; o != nil {
		for _, b := range o.Buffers {
			if b.Count > MaxTensorElements {
				return 0, fmt.Errorf("optimizer %s of %q: %d values", b.Slot, b.Param, b.Count)
			}
			if err := add(4 * b.Count); err != nil {
				return 0, err
			}
		}
	}
	if err := add(m.DataStateLen); err != nil {
		return 0, err
	}
	if err := add(m.RegularizerState); err != nil {
		return 0, err
	}
	return total, nil
}

func readFloats(r io.Reader, x []float32, scratch []byte) error {
	per := len(scratch) / 4
	for len(x) > 0 {
		n := min(len(x), per)
		if _, err := io.ReadFull(r, scratch[:4*n]); err != nil {
			return eofIsTruncation(err)
		}
		for i := range x[:n] {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(scratch[4*i:]))
		}
		x = x[n:]
	}
	return nil
}

func readBytes(r io.Reader, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, eofIsTruncation(err)
	}
	return b, nil
}

// eofIsTruncation turns an early end of input into ErrTruncated (the size
// check normally catches this first; a file shrinking while read does not).
func eofIsTruncation(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrTruncated
	}
	return err
}

// infoFrom converts metadata to an Info.
func infoFrom(m *meta, size int64) *Info {
	in := &Info{
		Version:          Version,
		BaseModel:        m.BaseModel,
		BaseSHA256:       m.BaseSHA256,
		RunID:            m.RunID,
		Created:          m.Created,
		Epoch:            m.Epoch,
		Step:             m.Step,
		Metrics:          m.Metrics,
		Config:           m.Config,
		Size:             size,
		DataStateLen:     m.DataStateLen,
		RegularizerState: m.RegularizerState,
	}
	for _, t := range m.Weights {
		in.Weights = append(in.Weights, Tensor{Name: t.Name, Shape: t.Shape})
	}
	if m.Optimizer != nil {
		in.Algorithm = m.Optimizer.Algorithm
	}
	return in
}

// EMAPrefix names, in a checkpoint of a run with an exponential moving
// average of its weights (finetune.Config.EMA), the average of each
// trained tensor: "ema/" + its name, beside the tensor itself. Export and
// evaluation use the averages; a resumed run restores both.
const EMAPrefix = "ema/"

// WithEMA is ws with each tensor that has a moving average replaced by
// it: the weights a run with EMA validates and exports.
func WithEMA(ws []Tensor) []Tensor {
	avg := map[string]Tensor{}
	for _, w := range ws {
		if name, ok := strings.CutPrefix(w.Name, EMAPrefix); ok {
			avg[name] = w
		}
	}
	var out []Tensor
	for _, w := range ws {
		if strings.HasPrefix(w.Name, EMAPrefix) {
			continue
		}
		if a, ok := avg[w.Name]; ok {
			w.Data = a.Data
		}
		out = append(out, w)
	}
	return out
}
