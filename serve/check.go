package serve

import "time"

// SettingError is an Options field no server runs with: Field is its
// name, Problem what it must be.
type SettingError struct {
	Field, Problem string
}

func (e *SettingError) Error() string { return e.Field + " " + e.Problem }

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
	}{{"MaxBatch", int64(o.MaxBatch)}, {"MaxBodyBytes", o.MaxBodyBytes}, {"MaxPixels", o.MaxPixels}, {"MaxConns", int64(o.MaxConns)}, {"MinBodyRate", o.MinBodyRate}} {
		if f.v < 1 {
			return &SettingError{Field: f.name, Problem: "must be at least 1"}
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"MaxPending", int64(o.MaxPending)}, {"MaxMemory", o.MaxMemory}, {"BodyMemory", o.BodyMemory}} {
		if f.v < 0 {
			return &SettingError{Field: f.name, Problem: "must not be negative"}
		}
	}
	if o.BodyMemory > 0 && o.BodyMemory < o.MaxBodyBytes {
		return &SettingError{Field: "BodyMemory", Problem: "must be at least MaxBodyBytes, the largest body"}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"ReadTimeout", o.ReadTimeout}, {"WriteTimeout", o.WriteTimeout}, {"ShutdownTimeout", o.ShutdownTimeout}} {
		if f.d <= 0 {
			return &SettingError{Field: f.name, Problem: "must be positive"}
		}
	}
	return nil
}
