package serve

import (
	"errors"
	"testing"
	"time"
)

func TestOptionsCheck(t *testing.T) {
	good := Options{MaxBatch: 4, MaxBodyBytes: 1 << 20, MaxPixels: 1e6, MaxConns: 8, MinBodyRate: 1024,
		ReadTimeout: time.Second, WriteTimeout: time.Second, ShutdownTimeout: time.Second}
	if err := good.Check(); err != nil {
		t.Fatalf("%+v: %v", good, err)
	}
	for _, c := range []struct {
		field string
		edit  func(*Options)
	}{
		{"max_batch", func(o *Options) { o.MaxBatch = 0 }},
		{"max_body", func(o *Options) { o.MaxBodyBytes = -1 }},
		{"max_pixels", func(o *Options) { o.MaxPixels = 0 }},
		{"max_conns", func(o *Options) { o.MaxConns = 0 }},
		{"max_pending", func(o *Options) { o.MaxPending = -1 }},
		{"min_body_rate", func(o *Options) { o.MinBodyRate = 0 }},
		{"max_memory", func(o *Options) { o.MaxMemory = -1 }},
		{"body_memory", func(o *Options) { o.BodyMemory = -1 }},
		{"body_memory", func(o *Options) { o.BodyMemory = o.MaxBodyBytes - 1 }},
		{"read_timeout", func(o *Options) { o.ReadTimeout = 0 }},
		{"write_timeout", func(o *Options) { o.WriteTimeout = -time.Second }},
		{"shutdown_timeout", func(o *Options) { o.ShutdownTimeout = 0 }},
	} {
		o := good
		c.edit(&o)
		var se *SettingError
		if err := o.Check(); !errors.As(err, &se) || se.Field != c.field {
			t.Errorf("%s refused: got %v, want a *SettingError of %s", c.field, err, c.field)
		}
	}
}
