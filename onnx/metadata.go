package onnx

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// SetMetadata sets the model's metadata_props entry key to value, replacing
// every entry of that key (the format wants keys distinct).
func (m *Model) SetMetadata(key, value string) {
	props := m.Proto.MetadataProps[:0]
	for _, e := range m.Proto.MetadataProps {
		if e.GetKey() != key {
			props = append(props, e)
		}
	}
	m.Proto.MetadataProps = append(props, entry(key, value))
}

// MetadataError reports a metadata_props entry that cannot be used: one
// over the reader's limit, or a key given more than once.
type MetadataError struct {
	Path, Key string
	Reason    string
}

func (e *MetadataError) Error() string {
	return fmt.Sprintf("onnx: %s: metadata_props %q: %s", e.Path, e.Key, e.Reason)
}

// metadataField is ModelProto's metadata_props field number.
const metadataField = 14

// ReadMetadata returns the value of the model file's metadata_props entry
// key without decoding the graph: it walks the file's top-level fields,
// skipping all but metadata_props, so memory stays bounded by limit
// whatever the model's size. A value longer than limit bytes, or the key
// present twice, is a MetadataError; found is false when the key is absent.
func ReadMetadata(path, key string, limit int) (value string, found bool, err error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("onnx: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	head, _ := r.Peek(sniffBytes) // what the file looks like, should it be no model
	for {
		tag, err := binary.ReadUvarint(r)
		if err == io.EOF {
			return value, found, nil
		}
		if err != nil {
			return "", false, notProtobuf(path, head, err)
		}
		num, typ := protowire.DecodeTag(tag)
		var n uint64
		switch typ {
		case protowire.VarintType:
			if _, err = binary.ReadUvarint(r); err != nil {
				return "", false, notProtobuf(path, head, err)
			}
			continue
		case protowire.Fixed64Type:
			n = 8
		case protowire.Fixed32Type:
			n = 4
		case protowire.BytesType:
			if n, err = binary.ReadUvarint(r); err != nil {
				return "", false, notProtobuf(path, head, err)
			}
		default:
			return "", false, notProtobuf(path, head, fmt.Errorf("wire type %d at the top level", typ))
		}
		if num != metadataField || typ != protowire.BytesType {
			if err := skip(r, n); err != nil {
				return "", false, notProtobuf(path, head, err)
			}
			continue
		}
		k, v, oversize, err := readEntry(r, n, limit)
		if err != nil {
			return "", false, notProtobuf(path, head, err)
		}
		if k != key {
			continue
		}
		switch {
		case oversize:
			return "", false, &MetadataError{Path: path, Key: key, Reason: fmt.Sprintf("its value is longer than %d bytes", limit)}
		case found:
			return "", false, &MetadataError{Path: path, Key: key, Reason: "the key is given more than once"}
		}
		value, found = v, true
	}
}

// readEntry reads a StringStringEntryProto of n bytes. One too long to hold
// a value of limit bytes is not kept: its key is read from its first bytes
// (encoders write the key first; a key not found there is treated as some
// other key) and the rest is skipped.
func readEntry(r *bufio.Reader, n uint64, limit int) (key, value string, oversize bool, err error) {
	const keyRoom = 4 << 10
	if n <= uint64(limit)+keyRoom {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", "", false, err
		}
		var e onnxpb.StringStringEntryProto
		if err := proto.Unmarshal(buf, &e); err != nil {
			return "", "", false, err
		}
		return e.GetKey(), e.GetValue(), len(e.GetValue()) > limit, nil
	}
	head := make([]byte, keyRoom)
	if _, err := io.ReadFull(r, head); err != nil {
		return "", "", false, err
	}
	if err := skip(r, n-keyRoom); err != nil {
		return "", "", false, err
	}
	if num, typ, l := protowire.ConsumeTag(head); l > 0 && num == 1 && typ == protowire.BytesType {
		if k, m := protowire.ConsumeBytes(head[l:]); m > 0 {
			return string(k), "", true, nil
		}
	}
	return "", "", true, nil
}

// skip discards n bytes of r, failing on a file that ends first.
func skip(r *bufio.Reader, n uint64) error {
	for n > 0 {
		step := min(n, 1<<30)
		d, err := r.Discard(int(step))
		n -= uint64(d)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

func notProtobuf(path string, head []byte, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &FormatError{Path: path, Err: fmt.Errorf("%w: %w", errNotProtobuf, err), LooksLike: LooksLike(head)}
}
