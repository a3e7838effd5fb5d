package storage

import (
	"context"
	"errors"
	"io/fs"

	"github.com/segtune/segtune/internal/setting"
)

// OpenSetting opens the folder v that the setting key names (OpenFolder)
// and, when it is local, checks before any work that it can be listed: a
// file, or a missing folder given as an input (input true), is refused.
// Errors name the setting and the folder ("{key} FOLDER: why").
func OpenSetting(ctx context.Context, key, v string, input bool) (*Folder, error) {
	f, err := OpenFolder(ctx, v)
	if err != nil {
		return nil, SettingError(key, v, err)
	}
	if f.IsLocal() {
		err := f.CheckList(ctx)
		if !input && errors.Is(err, fs.ErrNotExist) {
			err = nil // outputs are made when written
		}
		if err != nil {
			f.Close()
			return nil, SettingError(key, f.String(), err)
		}
	}
	return f, nil
}

// SettingError is err about the folder that the setting key names, as
// "{key} FOLDER: err" (setting.Messagef, the setting named as its reader
// calls it).
func SettingError(key, folder string, err error) error {
	return setting.Messagef("{"+key+"} %s: %w", folder, err)
}
