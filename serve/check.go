package serve

import "time"

// SettingError is an Options field no server runs with: Field is its
// setting's key (max_batch for MaxBatch), Problem what it must be.
type SettingError struct {
	Field, Problem string
}

func (e *SettingError) Error() string { return e.Named(func(key string) string { return key }) }

// Named is the message with the setting called by name(key)
// (setting.Namer), as the CLI calls it by its flag.
func (e *SettingError) Named(name func(key string) string) string {
	return name(e.Field) + " " + e.Problem
}

// Check refuses options a user gave that no server runs with: a count
// below 1 (MaxBatch, MaxBodyBytes, MaxPixels, MaxConns, MinBodyRate), a
// negative MaxPending (0 is 4×MaxBatch), MaxMemory or BodyMemory (0 is
// their share of the memory limit), a BodyMemory below MaxBodyBytes (the
// largest body could never be received) or a timeout that is not positive. New
// takes zero fields as their defaults; Check is for settings read from a
// user, who means the value given. Errors are *SettingError.
func (o Options) Check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_batch", int64(o.MaxBatch)}, {"max_body", o.MaxBodyBytes}, {"max_pixels", o.MaxPixels}, {"max_conns", int64(o.MaxConns)}, {"min_body_rate", o.MinBodyRate}} {
		if f.v < 1 {
			return &SettingError{Field: f.name, Problem: "must be at least 1"}
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_pending", int64(o.MaxPending)}, {"max_memory", o.MaxMemory}, {"body_memory", o.BodyMemory}} {
		if f.v < 0 {
			return &SettingError{Field: f.name, Problem: "must not be negative"}
		}
	}
	if o.BodyMemory > 0 && o.BodyMemory < o.MaxBodyBytes {
		return &SettingError{Field: "body_memory", Problem: "must be at least max_body, the largest body"}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"read_timeout", o.ReadTimeout}, {"write_timeout", o.WriteTimeout}, {"shutdown_timeout", o.ShutdownTimeout}} {
		if f.d <= 0 {
			return &SettingError{Field: f.name, Problem: "must be positive"}
		}
	}
	return nil
}
