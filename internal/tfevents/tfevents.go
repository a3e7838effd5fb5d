// Package tfevents writes TensorBoard event files: TFRecord framing around
// serialised tensorflow.Event protocol buffers, the format TensorBoard
// reads from a log folder (files named events.out.tfevents.*).
//
// A record is its length (uint64, little endian), the masked CRC-32C of
// those eight bytes, the data, and the masked CRC-32C of the data; the
// mask is ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record holds one
// Event (tensorflow/core/util/event.proto): wall_time (1, double), step
// (2, int64), and one of file_version (3, string), summary (5) or
// session_log (6). A Summary (tensorflow/core/framework/summary.proto)
// holds Values: tag (1), simple_value (2, float) or image (4: height 1,
// width 2, colorspace 3, encoded_image_string 4).
package tfevents

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Writer appends events to one new event file.
type Writer struct {
	f    *os.File
	w    *bufio.Writer
	path string
	now  func() time.Time
}

// Create makes dir if needed and a new event file in it, named as
// TensorBoard's writers name theirs (events.out.tfevents.SECONDS.HOST plus
// a suffix), never over an existing file or through a link; the file
// starts with the version event.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("TensorBoard folder %s: not a folder (a symbolic link or a file is refused)", dir)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	now := time.Now()
	var f *os.File
	var err error
	var path string
	for i := 0; i < 100; i++ {
		path = filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s.%d.%d", now.Unix(), host, os.Getpid(), i))
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating a TensorBoard event file in %s: %w", dir, err)
	}
	w := &Writer{f: f, w: bufio.NewWriter(f), path: path, now: time.Now}
	var ev []byte
	ev = protowire.AppendTag(ev, 3, protowire.BytesType)
	ev = protowire.AppendString(ev, "brain.Event:2")
	if err := w.event(0, ev); err != nil {
		f.Close()
		return nil, err
	}
	return w, w.Flush()
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalars writes one summary with a simple value per tag, at step, in tag
// order. Non-finite values are written as they are (TensorBoard shows them).
func (w *Writer) Scalars(step int64, values map[string]float64) error {
	tags := make([]string, 0, len(values))
	for t := range values {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	var sum []byte
	for _, t := range tags {
		var v []byte
		v = protowire.AppendTag(v, 1, protowire.BytesType)
		v = protowire.AppendString(v, t)
		v = protowire.AppendTag(v, 2, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(values[t])))
		sum = protowire.AppendTag(sum, 1, protowire.BytesType)
		sum = protowire.AppendBytes(sum, v)
	}
	return w.summary(step, sum)
}

// Image writes one encoded image (PNG) of width×height with 3 channels
// under tag at step.
func (w *Writer) Image(step int64, tag string, png []byte, width, height int) error {
	var img []byte
	img = protowire.AppendTag(img, 1, protowire.VarintType)
	img = protowire.AppendVarint(img, uint64(height))
	img = protowire.AppendTag(img, 2, protowire.VarintType)
	img = protowire.AppendVarint(img, uint64(width))
	img = protowire.AppendTag(img, 3, protowire.VarintType)
	img = protowire.AppendVarint(img, 3)
	img = protowire.AppendTag(img, 4, protowire.BytesType)
	img = protowire.AppendBytes(img, png)
	var v []byte
	v = protowire.AppendTag(v, 1, protowire.BytesType)
	v = protowire.AppendString(v, tag)
	v = protowire.AppendTag(v, 4, protowire.BytesType)
	v = protowire.AppendBytes(v, img)
	var sum []byte
	sum = protowire.AppendTag(sum, 1, protowire.BytesType)
	sum = protowire.AppendBytes(sum, v)
	return w.summary(step, sum)
}

// Restart writes a SessionLog START at step: TensorBoard then drops the
// events of earlier files at or after step, as a resumed run needs (the
// steps it repeats would otherwise show twice).
func (w *Writer) Restart(step int64) error {
	var log []byte
	log = protowire.AppendTag(log, 1, protowire.VarintType)
	log = protowire.AppendVarint(log, 1) // START
	var ev []byte
	ev = protowire.AppendTag(ev, 6, protowire.BytesType)
	ev = protowire.AppendBytes(ev, log)
	return w.event(step, ev)
}

func (w *Writer) summary(step int64, sum []byte) error {
	var ev []byte
	ev = protowire.AppendTag(ev, 5, protowire.BytesType)
	ev = protowire.AppendBytes(ev, sum)
	return w.event(step, ev)
}

// event writes one record: Event{wall_time, step} followed by body.
func (w *Writer) event(step int64, body []byte) error {
	t := w.now()
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(float64(t.UnixNano())/1e9))
	if step != 0 {
		ev = protowire.AppendTag(ev, 2, protowire.VarintType)
		ev = protowire.AppendVarint(ev, uint64(step))
	}
	ev = append(ev, body...)
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(ev)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	var tail [4]byte
	binary.LittleEndian.PutUint32(tail[:], maskedCRC(ev))
	for _, b := range [][]byte{head[:], ev, tail[:]} {
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("writing %s: %w", w.path, err)
		}
	}
	return nil
}

// Flush writes buffered events to the file, so that TensorBoard sees them.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}
