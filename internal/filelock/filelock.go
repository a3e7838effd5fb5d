// Package filelock takes exclusive advisory locks (flock) on files, the
// mechanism finetune's run folders use: the kernel drops a lock when its
// process exits, however it exits, so a stale lock never blocks anyone.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock is a held lock; Unlock releases it.
type Lock struct{ f *os.File }

// pollInterval is how often Acquire retries a lock another process holds.
const pollInterval = 50 * time.Millisecond

// Acquire locks the file at path (created if missing), waiting while
// another process (or another Lock in this one) holds it, until ctx ends.
// waiting, when not nil, is called once, the first time it has to wait,
// so the caller can say why nothing happens.
func Acquire(ctx context.Context, path string, waiting func()) (*Lock, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("lock %s is not a regular file; remove it", path)
	}
	// O_NOFOLLOW: a planted link is never created or truncated through.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for told := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &Lock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// Unlock releases the lock (closing the file drops the flock). The file
// stays: removing it would let a third process lock a fresh inode while
// the second still holds the old one.
func (l *Lock) Unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
