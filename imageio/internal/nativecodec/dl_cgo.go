//go:build cgo && (linux || darwin || freebsd)

package nativecodec

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- TurboJPEG 2.x (libturbojpeg) ----
typedef void *tjhandle;
#define TJPF_RGBA 7
#define TJFLAG_FASTUPSAMPLE 256
#define TJFLAG_NOREALLOC 1024

static struct {
	void *lib;
	tjhandle (*initDecompress)(void);
	int (*decompressHeader3)(tjhandle, const unsigned char *, unsigned long, int *, int *, int *, int *);
	int (*decompress2)(tjhandle, const unsigned char *, unsigned long, unsigned char *, int, int, int, int, int);
	char *(*getErrorStr2)(tjhandle);
	int (*getErrorCode)(tjhandle);
	int (*destroy)(tjhandle);
} tj;

static void copyMsg(char *dst, size_t n, const char *src) {
	if (n == 0) return;
	if (src == NULL) src = "unknown error";
	strncpy(dst, src, n - 1);
	dst[n - 1] = 0;
}

// segtune_tj_load returns 0, or 1 with the reason in msg.
static int segtune_tj_load(const char *name, char *msg, size_t n) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) { copyMsg(msg, n, dlerror()); return 1; }
#define SYM(field, sym) \
	*(void **)(&tj.field) = dlsym(h, sym); \
	if (tj.field == NULL) { copyMsg(msg, n, "symbol " sym " missing"); dlclose(h); return 1; }
	SYM(initDecompress, "tjInitDecompress")
	SYM(decompressHeader3, "tjDecompressHeader3")
	SYM(decompress2, "tjDecompress2")
	SYM(getErrorStr2, "tjGetErrorStr2")
	SYM(getErrorCode, "tjGetErrorCode")
	SYM(destroy, "tjDestroy")
#undef SYM
	tj.lib = h;
	return 0;
}

// segtune_tj_header returns 0, or -1 with the library's message in msg.
static int segtune_tj_header(const unsigned char *buf, unsigned long len, int *w, int *h, int *cs, char *msg, size_t n) {
	tjhandle t = tj.initDecompress();
	if (t == NULL) { copyMsg(msg, n, "tjInitDecompress failed"); return -1; }
	int sub = 0;
	int rc = tj.decompressHeader3(t, buf, len, w, h, &sub, cs);
	if (rc != 0) copyMsg(msg, n, tj.getErrorStr2(t));
	tj.destroy(t);
	return rc == 0 ? 0 : -1;
}

// segtune_tj_decode returns 0; 1 for a warning (pixels written, but the
// data was damaged) or -1 for an error, with the message in msg.
static int segtune_tj_decode(const unsigned char *buf, unsigned long len, unsigned char *dst, int w, int h, char *msg, size_t n) {
	tjhandle t = tj.initDecompress();
	if (t == NULL) { copyMsg(msg, n, "tjInitDecompress failed"); return -1; }
	int ret = 0;
	if (tj.decompress2(t, buf, len, dst, w, w * 4, h, TJPF_RGBA, TJFLAG_FASTUPSAMPLE | TJFLAG_NOREALLOC) != 0) {
		ret = tj.getErrorCode(t) == 0 ? 1 : -1; // TJERR_WARNING is 0
		copyMsg(msg, n, tj.getErrorStr2(t));
	}
	tj.destroy(t);
	return ret;
}

// ---- libspng 0.7 ----
typedef struct spng_ctx spng_ctx;
struct spng_ihdr {
	uint32_t width, height;
	uint8_t bit_depth, color_type, compression_method, filter_method, interlace_method;
};

static struct {
	void *lib;
	spng_ctx *(*ctxNew)(int);
	void (*ctxFree)(spng_ctx *);
	int (*setBuffer)(spng_ctx *, const void *, size_t);
	int (*setImageLimits)(spng_ctx *, uint32_t, uint32_t);
	int (*getIHDR)(spng_ctx *, struct spng_ihdr *);
	int (*decodedSize)(spng_ctx *, int, size_t *);
	int (*decode)(spng_ctx *, void *, size_t, int, int);
	const char *(*strerror)(int);
	const char *(*version)(void);
} sp;

// ---- zlib 1.x (libz.so.1, which libspng links to) ----
// z_stream as zlib.h declares it; its layout has not changed since 1.0.
typedef struct {
	const unsigned char *next_in;
	unsigned avail_in;
	unsigned long total_in;
	unsigned char *next_out;
	unsigned avail_out;
	unsigned long total_out;
	const char *msg;
	void *state;
	void *zalloc, *zfree, *opaque;
	int data_type;
	unsigned long adler, reserved;
} segtune_zstream;
#define Z_OK 0
#define Z_STREAM_END 1
#define Z_BUF_ERROR (-5)
#define Z_NO_FLUSH 0

static struct {
	int (*inflateInit_)(segtune_zstream *, const char *, int);
	int (*inflate)(segtune_zstream *, int);
	int (*inflateEnd)(segtune_zstream *);
} zl;

static int segtune_zlib_load(char *msg, size_t n) {
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) h = dlopen("libz.1.dylib", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) { copyMsg(msg, n, dlerror()); return 1; }
	*(void **)(&zl.inflateInit_) = dlsym(h, "inflateInit_");
	*(void **)(&zl.inflate) = dlsym(h, "inflate");
	*(void **)(&zl.inflateEnd) = dlsym(h, "inflateEnd");
	if (zl.inflateInit_ == NULL || zl.inflate == NULL || zl.inflateEnd == NULL) {
		copyMsg(msg, n, "zlib: inflate symbols missing");
		dlclose(h);
		return 1;
	}
	return 0;
}

// segtune_png_stream_check inflates the image data stream held in the
// nspans chunk data spans of buf and returns 0 when it inflates to exactly
// want bytes with a valid Adler-32 and ends where one of the spans ends,
// as image/png requires; else -1 with the reason in msg. The output is
// thrown away (libspng decodes the pixels); only its length counts.
static int segtune_png_stream_check(const unsigned char *buf, const uint64_t *off, const uint32_t *len, int nspans,
		uint64_t want, char *msg, size_t n) {
	segtune_zstream z;
	memset(&z, 0, sizeof z);
	if (zl.inflateInit_(&z, "1", (int)sizeof z) != Z_OK) { copyMsg(msg, n, "zlib: inflateInit failed"); return -1; }
	unsigned char out[32768];
	uint64_t got = 0;
	int span = 0, rc = Z_OK, ret = -1;
	z.next_in = buf + off[0];
	z.avail_in = len[0];
	for (;;) {
		z.next_out = out;
		z.avail_out = sizeof out;
		rc = zl.inflate(&z, Z_NO_FLUSH);
		got += sizeof out - z.avail_out;
		if (got > want) { copyMsg(msg, n, "too much pixel data"); break; }
		if (rc == Z_STREAM_END) {
			if (got != want) copyMsg(msg, n, "not enough pixel data");
			else if (z.avail_in != 0) copyMsg(msg, n, "too much pixel data");
			else ret = 0;
			break;
		}
		if (rc == Z_OK && z.avail_out == 0) continue; // more output pending
		if (rc == Z_OK || rc == Z_BUF_ERROR) { // all input taken: the next chunk's
			if (z.avail_in != 0) { copyMsg(msg, n, "zlib: no progress"); break; }
			if (++span == nspans) { copyMsg(msg, n, "not enough pixel data"); break; }
			z.next_in = buf + off[span];
			z.avail_in = len[span];
			continue;
		}
		if (rc != Z_OK) { copyMsg(msg, n, z.msg != NULL ? z.msg : "zlib: data error"); break; }
	}
	zl.inflateEnd(&z);
	return ret;
}

static int segtune_spng_load(const char *name, char *msg, size_t n) {
	if (zl.inflate == NULL && segtune_zlib_load(msg, n) != 0) return 1;
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) { copyMsg(msg, n, dlerror()); return 1; }
#define SYM(field, sym) \
	*(void **)(&sp.field) = dlsym(h, sym); \
	if (sp.field == NULL) { copyMsg(msg, n, "symbol " sym " missing"); dlclose(h); return 1; }
	SYM(ctxNew, "spng_ctx_new")
	SYM(ctxFree, "spng_ctx_free")
	SYM(setBuffer, "spng_set_png_buffer")
	SYM(setImageLimits, "spng_set_image_limits")
	SYM(getIHDR, "spng_get_ihdr")
	SYM(decodedSize, "spng_decoded_image_size")
	SYM(decode, "spng_decode_image")
	SYM(strerror, "spng_strerror")
	SYM(version, "spng_version_string")
#undef SYM
	sp.lib = h;
	return 0;
}

static const char *segtune_spng_version(void) { return sp.version(); }

// segtune_spng_decode decodes buf into dst (exactly len bytes of format
// fmt, w×h) and returns 0, or -1 with the message in msg.
static int segtune_spng_decode(const void *buf, size_t blen, void *dst, size_t len, int fmt, uint32_t w, uint32_t h, char *msg, size_t n) {
	spng_ctx *ctx = sp.ctxNew(0);
	if (ctx == NULL) { copyMsg(msg, n, "spng_ctx_new failed"); return -1; }
	int rc = sp.setImageLimits(ctx, w, h);
	if (rc == 0) rc = sp.setBuffer(ctx, buf, blen);
	struct spng_ihdr ihdr;
	if (rc == 0) rc = sp.getIHDR(ctx, &ihdr);
	if (rc == 0 && (ihdr.width != w || ihdr.height != h)) {
		copyMsg(msg, n, "IHDR size differs from the one read before");
		sp.ctxFree(ctx);
		return -1;
	}
	size_t need = 0;
	if (rc == 0) rc = sp.decodedSize(ctx, fmt, &need);
	if (rc == 0 && need != len) {
		copyMsg(msg, n, "unexpected decoded size");
		sp.ctxFree(ctx);
		return -1;
	}
	if (rc == 0) rc = sp.decode(ctx, dst, len, fmt, 0);
	if (rc != 0) copyMsg(msg, n, sp.strerror(rc));
	sp.ctxFree(ctx);
	return rc == 0 ? 0 : -1;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

const (
	tjcsRGB   = 0
	tjcsYCbCr = 1
	tjcsGray  = 2

	spngFmtRGBA8 = 1
	spngFmtPNG   = 256
)

// JPEGNames and PNGNames are the library file names tried, in order.
var (
	JPEGNames = []string{"libturbojpeg.so.0", "libturbojpeg.0.dylib", "libturbojpeg.so", "libturbojpeg.dylib"}
	PNGNames  = []string{"libspng.so.0", "libspng.0.dylib", "libspng.so", "libspng.dylib"}
)

type loader struct {
	once sync.Once
	name string
	err  error
}

var jpegLib, pngLib loader

const msgLen = 256

func (l *loader) load(names []string, what string, try func(name string, msg *C.char) C.int) error {
	l.once.Do(func() {
		var why []string
		msg := (*C.char)(C.calloc(msgLen, 1))
		defer C.free(unsafe.Pointer(msg))
		for _, n := range names {
			if try(n, msg) == 0 {
				l.name = n
				return
			}
			why = append(why, C.GoString(msg))
		}
		l.name = strings.Join(names, ", ")
		l.err = fmt.Errorf("%w: %s not found (%s)", ErrUnavailable, what, strings.Join(why, "; "))
	})
	return l.err
}

func loadJPEG() error {
	return jpegLib.load(JPEGNames, "libjpeg-turbo", func(name string, msg *C.char) C.int {
		cn := C.CString(name)
		defer C.free(unsafe.Pointer(cn))
		return C.segtune_tj_load(cn, msg, msgLen)
	})
}

func loadPNG() error {
	return pngLib.load(PNGNames, "libspng", func(name string, msg *C.char) C.int {
		cn := C.CString(name)
		defer C.free(unsafe.Pointer(cn))
		return C.segtune_spng_load(cn, msg, msgLen)
	})
}

func jpegName() string { return jpegLib.name }

func pngName() string {
	if pngLib.err == nil && pngLib.name != "" {
		return pngLib.name + " " + C.GoString(C.segtune_spng_version())
	}
	return pngLib.name
}

// ResetForTest forgets the loaded libraries (their handles stay open) and
// sets the names tried next, so that a test can see a library missing.
func ResetForTest(jpegNames, pngNames []string) {
	jpegLib, pngLib = loader{}, loader{}
	JPEGNames, PNGNames = jpegNames, pngNames
}

func jpegHeader(data []byte) (w, h, cs int, err error) {
	var cw, ch, ccs C.int
	var msg [msgLen]C.char
	if C.segtune_tj_header((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), &cw, &ch, &ccs, &msg[0], msgLen) != 0 {
		return 0, 0, 0, errors.New("libjpeg-turbo: " + C.GoString(&msg[0]))
	}
	return int(cw), int(ch), int(ccs), nil
}

func jpegDecode(data, dst []byte, w, h int) error {
	var msg [msgLen]C.char
	switch C.segtune_tj_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&dst[0])), C.int(w), C.int(h), &msg[0], msgLen) {
	case 0:
		return nil
	case 1:
		return &WarningError{Msg: "libjpeg-turbo: " + C.GoString(&msg[0])}
	}
	return errors.New("libjpeg-turbo: " + C.GoString(&msg[0]))
}

func pngStreamCheck(data []byte, idat []Span, filtered int64) error {
	if len(idat) == 0 || filtered <= 0 {
		return errors.New("libspng: no image data")
	}
	offs := make([]C.uint64_t, len(idat))
	lens := make([]C.uint32_t, len(idat))
	for i, s := range idat {
		if s.Off < 0 || s.Len < 0 || s.Off+s.Len > len(data) || int64(s.Len) > 0x7fffffff {
			return errors.New("libspng: image data span outside the file")
		}
		offs[i], lens[i] = C.uint64_t(s.Off), C.uint32_t(s.Len)
	}
	var msg [msgLen]C.char
	if C.segtune_png_stream_check((*C.uchar)(unsafe.Pointer(&data[0])), &offs[0], &lens[0], C.int(len(idat)),
		C.uint64_t(filtered), &msg[0], msgLen) != 0 {
		return errors.New("png image data: " + C.GoString(&msg[0]))
	}
	return nil
}

func pngDecode(data, dst []byte, format, w, h int) error {
	var msg [msgLen]C.char
	if C.segtune_spng_decode(unsafe.Pointer(&data[0]), C.size_t(len(data)), unsafe.Pointer(&dst[0]), C.size_t(len(dst)),
		C.int(format), C.uint32_t(w), C.uint32_t(h), &msg[0], msgLen) != 0 {
		return errors.New("libspng: " + C.GoString(&msg[0]))
	}
	return nil
}
