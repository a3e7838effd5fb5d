//go:build !noazure

package storage

import (
	_ "gocloud.dev/blob/azureblob" // azblob://
)

func init() { backends["azblob"] = nil }
