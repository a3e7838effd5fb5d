package imageio

import (
	"bufio"
	"bytes"
	"image"
	"io"

	"golang.org/x/image/tiff"
)

// Go's TIFF decoder reads a file through a buffer that it grows, at once,
// to the end of whatever range the file's header names, when the reader
// it is given cannot read at offsets, as image.Decode's never can (it
// wraps every reader): a 300-byte TIFF whose strip claims 4 GiB made it
// allocate 8 GiB, and die of it under an address-space limit. Given an
// io.ReaderAt it reads in bounded chunks instead and fails at the file's
// end. TIFF files therefore go to it directly, as a section of the file.

// tiffMagic reports whether head starts as a TIFF file does.
func tiffMagic(head []byte) bool {
	return bytes.HasPrefix(head, []byte("II*\x00")) || bytes.HasPrefix(head, []byte("MM\x00*"))
}

// tiffSection returns the TIFF file in r, from its current position, as
// a reader at offsets: a section of r where r reads at offsets and seeks,
// else its bytes read whole (a stream holds no more than it sends).
func tiffSection(r io.Reader) (*io.SectionReader, error) {
	if ra, ok := r.(interface {
		io.ReaderAt
		io.Seeker
	}); ok {
		start, err := ra.Seek(0, io.SeekCurrent)
		if err == nil {
			var end int64
			if end, err = ra.Seek(0, io.SeekEnd); err == nil {
				_, err = ra.Seek(start, io.SeekStart)
			}
			if err == nil {
				return io.NewSectionReader(ra, start, end-start), nil
			}
		}
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(bytes.NewReader(data), 0, int64(len(data))), nil
}

// sniffTIFF reports whether r starts as a TIFF file, returning a reader
// that still starts where r did.
func sniffTIFF(r io.Reader) (io.Reader, bool) {
	if rs, ok := r.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err == nil {
			head := make([]byte, 4)
			n, _ := io.ReadFull(rs, head)
			if _, err := rs.Seek(start, io.SeekStart); err == nil {
				return rs, tiffMagic(head[:n])
			}
		}
	}
	br := bufio.NewReader(r)
	head, _ := br.Peek(4)
	return br, tiffMagic(head)
}

// decodeTIFFConfig and decodeTIFF are image.DecodeConfig and image.Decode
// for a TIFF file (sniffTIFF), through tiffSection.
func decodeTIFFConfig(r io.Reader) (cfg image.Config, format string, err error) {
	defer recoverDecode(&err)
	sr, err := tiffSection(r)
	if err != nil {
		return cfg, "tiff", err
	}
	cfg, err = tiff.DecodeConfig(sr)
	return cfg, "tiff", err
}

func decodeTIFF(r io.Reader) (img image.Image, format string, err error) {
	defer recoverDecode(&err)
	sr, err := tiffSection(r)
	if err != nil {
		return nil, "tiff", err
	}
	img, err = tiff.Decode(sr)
	return img, "tiff", err
}
