package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteCreatesAndReplacesRegularFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := Write(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "two" {
		t.Fatalf("got %q", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

func TestWriteFailureLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	os.WriteFile(path, []byte("old"), 0o644)
	err := WriteFunc(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return errors.New("disk on fire")
	})
	if err == nil {
		t.Fatal("no error")
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("old file changed: %q", got)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	if err := Write(filepath.Join(dir, "no", "such", "x"), nil, 0o644); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}

// Defect: an atomic rename replaced whatever was at the destination, a FIFO
// or a device node included (as root, /dev/null itself).
func TestWriteRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	sub := filepath.Join(dir, "folder")
	os.Mkdir(sub, 0o755)
	link := filepath.Join(dir, "link.onnx")
	os.Symlink(fifo, link)
	targets := []string{fifo, sub, link}
	// A device node: made here (as root), never the system's /dev/null,
	// which a broken Write would replace for the whole machine.
	dev := filepath.Join(dir, "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
		targets = append(targets, dev)
	}
	for _, p := range targets {
		err := Write(p, []byte("x"), 0o644)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") && !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s: err = %v, want a refusal", p, err)
		}
	}
	fi, err := os.Lstat(fifo)
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
	if fi, err := os.Lstat(dev); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("the device node was replaced: %v", fi.Mode())
	}
}

// Defect: a symbolic link in the output folder was followed, and the file
// it pointed at replaced: `export --out exp/link.onnx` with the link to a
// file outside, or a mask name in segment's output folder (as root, a link
// to /etc/passwd replaced /etc/passwd). Now the link is refused, and both
// it and its target are left as they were.
func TestWriteRefusesSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	real := filepath.Join(outside, "real.txt")
	os.WriteFile(real, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.txt")
	os.Symlink(real, link)
	dangling := filepath.Join(dir, "dangling.txt")
	os.Symlink(filepath.Join(outside, "new.txt"), dangling)
	for _, p := range []string{link, dangling} {
		if err := Write(p, []byte("new"), 0o644); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s: err = %v, want a refusal naming the link", p, err)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: the link was replaced: %v %v", p, fi, err)
		}
	}
	if got, _ := os.ReadFile(real); string(got) != "old" {
		t.Errorf("the link's target now holds %q", got)
	}
	if _, err := os.Lstat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("a file was created through the dangling link")
	}
	if _, err := Target(link); err == nil {
		t.Error("Target accepted a symbolic link")
	}
}

// Every refusal is a *DestinationError naming the path as given and the
// entry's own type (a link is not followed to learn it): a link to a file
// outside, a link to a folder, a FIFO, a folder, a link to a FIFO, "a/..".
func TestWriteRefusalsAreTyped(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("old"), 0o644)
	fifo := filepath.Join(dir, "pipe.png")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "folder.png"), 0o755)
	cases := map[string]os.FileMode{
		"to-file.png":   os.ModeSymlink,
		"to-dir.png":    os.ModeSymlink,
		"to-fifo.png":   os.ModeSymlink,
		"pipe.png":      os.ModeNamedPipe,
		"folder.png":    os.ModeDir,
		"folder.png/..": os.ModeDir,
	}
	os.Symlink(secret, filepath.Join(dir, "to-file.png"))
	os.Symlink(outside, filepath.Join(dir, "to-dir.png"))
	os.Symlink(fifo, filepath.Join(dir, "to-fifo.png"))
	for name, mode := range cases {
		p := filepath.Join(dir, name)
		for _, err := range []error{Write(p, []byte("new"), 0o644), func() error { _, err := Target(p); return err }()} {
			var de *DestinationError
			if !errors.As(err, &de) || de.Path != p || de.Mode.Type() != mode {
				t.Errorf("%s: err = %v, want a DestinationError for %v", name, err, mode)
			}
		}
	}
	if got, _ := os.ReadFile(secret); string(got) != "old" {
		t.Errorf("the file outside now holds %q", got)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files created in the folder a link points to: %v", entries)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

// The folder is held from the start: when the destination's folder is
// swapped for a link to another folder while the file is written, the file
// still lands in the folder that was opened, and nothing is written where
// the link points.
func TestWriteStaysInTheFolderItOpened(t *testing.T) {
	parent, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(parent, "out")
	os.Mkdir(dir, 0o755)
	moved := filepath.Join(parent, "moved")
	err := WriteFunc(filepath.Join(dir, "mask.png"), 0o644, func(w io.Writer) error {
		if err := os.Rename(dir, moved); err != nil {
			return err
		}
		if err := os.Symlink(outside, dir); err != nil {
			return err
		}
		_, err := w.Write([]byte("mask"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(moved, "mask.png")); err != nil || string(got) != "mask" {
		t.Errorf("the opened folder holds %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the swapped-in link: %v", entries)
	}
}

// A folder reached through a symbolic link the user named is still a
// folder to write into: only the destination entry itself must not be a
// link.
func TestWriteIntoLinkedFolder(t *testing.T) {
	real, parent := t.TempDir(), t.TempDir()
	link := filepath.Join(parent, "out")
	os.Symlink(real, link)
	if err := Write(filepath.Join(link, "a.png"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(real, "a.png")); string(got) != "x" {
		t.Errorf("got %q", got)
	}
}

// Defect: temporary files of killed processes were never cleaned up.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	// A process id that is certainly not running: beyond pid_max.
	dead := filepath.Join(dir, TempPrefix("a.png")+"99999999-123")
	live := filepath.Join(dir, TempPrefix("b.png")+"1-123") // init always runs
	mine := filepath.Join(dir, TempPrefix("c.png")+itoa(os.Getpid())+"-1")
	user := filepath.Join(dir, "a.png.tmp-99999999-1") // not hidden: the user's
	for _, p := range []string{dead, live, mine, user} {
		os.WriteFile(p, nil, 0o644)
	}
	removed := RemoveStale(dir)
	if len(removed) != 1 || removed[0] != filepath.Base(dead) {
		t.Errorf("removed %v, want only %s", removed, filepath.Base(dead))
	}
	for _, p := range []string{live, mine, user} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed", p)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
