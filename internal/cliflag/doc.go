// Package cliflag adds to urfave/cli commands what its parser lacks: hooks
// that run before a command's own, flag values read from a YAML or JSON
// file, numeric ranges checked before any work, and file:// URLs turned
// into the paths they name. It knows no command or flag of its own: the
// program passes its tables in.
package cliflag
