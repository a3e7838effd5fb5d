package filelock

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// A second Acquire waits, says so once, and gets the lock when the first
// is released; a cancelled wait gives up with the context's error.
func TestAcquireWaitsForHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	first, err := Acquire(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, err := Acquire(ctx, path, nil); err == nil {
		t.Fatal("second Acquire got a lock that is held")
	}
	waited := make(chan struct{}, 4)
	got := make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path, func() { waited <- struct{}{} })
		if err == nil {
			l.Unlock()
		}
		got <- err
	}()
	<-waited
	select {
	case <-got:
		t.Fatal("second Acquire returned while the first held the lock")
	case <-time.After(100 * time.Millisecond):
	}
	first.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if len(waited) != 0 {
		t.Fatalf("waiting called %d more times; want once", len(waited))
	}
}
