//go:build !nogcs

package storage

import (
	"context"
	"fmt"
	"os"

	_ "gocloud.dev/blob/gcsblob" // gs://
	"gocloud.dev/gcp"
)

// Google Cloud Storage's client (gRPC, its xDS and telemetry) is about a
// third of the stripped binary: `-tags nogcs` leaves it out.
func init() {
	backends["gs"] = func(ctx context.Context, l Location) error {
		// Google's library would otherwise print a warning and go on
		// without credentials.
		if os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" {
			return nil
		}
		if _, err := gcp.DefaultCredentials(ctx); err != nil {
			return fmt.Errorf("%s: no Google Cloud credentials (%v); %s", l, err, hint(l.Scheme))
		}
		return nil
	}
}
