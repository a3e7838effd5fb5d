package setting

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

// A message names its settings by {key}: by key on its own, its caller's
// way through Rename, with the arguments (a path holding braces or %)
// left as they are and the wrapped error reachable.
func TestMessagefNamesItsSettings(t *testing.T) {
	flag := func(key string) string { return "--" + key + "%" }
	err := fmt.Errorf("open: %w", Messagef("%s: lower {batch} or {crop} ({not a key}): %w", "/d/{batch}%d", fs.ErrNotExist))
	if got, want := err.Error(), "open: /d/{batch}%d: lower batch or crop ({not a key}): file does not exist"; got != want {
		t.Errorf("by key: %q, want %q", got, want)
	}
	named := Rename(err, flag)
	if got, want := named.Error(), "open: /d/{batch}%d: lower --batch% or --crop% ({not a key}): file does not exist"; got != want {
		t.Errorf("named: %q, want %q", got, want)
	}
	if !errors.Is(named, fs.ErrNotExist) {
		t.Errorf("%q does not reach fs.ErrNotExist", named)
	}
	if got, want := Advice("raise {max_memory}").Named(flag), "raise --max_memory%"; got != want {
		t.Errorf("advice: %q, want %q", got, want)
	}
	// An *Error whose cause names a setting names it too.
	se := &Error{Setting: "conv_grad", Value: "all", Err: Messagef("needs {device} cuda")}
	if got, want := Rename(se, flag).Error(), "--conv_grad% all: needs --device% cuda"; got != want {
		t.Errorf("nested: %q, want %q", got, want)
	}
}
