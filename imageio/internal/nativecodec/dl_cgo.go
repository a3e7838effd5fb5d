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
)

// JPEGNames are the library file names tried, in order.
var JPEGNames = []string{"libturbojpeg.so.0", "libturbojpeg.0.dylib", "libturbojpeg.so", "libturbojpeg.dylib"}

type loader struct {
	once sync.Once
	name string
	err  error
}

var jpegLib loader

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

func jpegName() string { return jpegLib.name }

// ResetForTest forgets the loaded library (its handle stays open) and
// sets the names tried next, so that a test can see the library missing.
func ResetForTest(jpegNames []string) {
	jpegLib = loader{}
	JPEGNames = jpegNames
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
