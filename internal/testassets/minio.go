package testassets

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MinIOEnvVar names a minio binary to use instead of the one that
// scripts/install-minio.sh builds into the cache.
const MinIOEnvVar = "SEGTUNE_MINIO"

// MinIO is an S3-compatible server started for one test on a loopback port.
type MinIO struct {
	Endpoint          string // http://127.0.0.1:PORT
	AccessKey, Secret string
}

// RequireMinIO starts MinIO (scripts/install-minio.sh, `make minio`) on a
// free loopback port with a fresh data folder, stops it when the test
// ends, and points the AWS SDK at nothing but its credentials (no shared
// config files, no EC2 metadata service): the process environment is set
// for the test (so the test must not be parallel). Without MinIO the test
// skips, or fails under $SEGTUNE_REQUIRE_ASSETS.
func RequireMinIO(tb testing.TB) *MinIO {
	tb.Helper()
	bin := os.Getenv(MinIOEnvVar)
	if bin == "" {
		if script := FindUp(filepath.Join("scripts", "install-minio.sh")); script != "" {
			if out, err := exec.Command(script, "--check").Output(); err == nil {
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				bin = strings.TrimSpace(lines[len(lines)-1])
			}
		}
	}
	if bin == "" {
		SkipOrFail(tb, "MinIO not installed (make minio, or set %s)", MinIOEnvVar)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	m := &MinIO{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), AccessKey: "segtune-test", Secret: "segtune-test-secret"}
	cmd := exec.Command(bin, "server", "--quiet", "--address", fmt.Sprintf("127.0.0.1:%d", port), tb.TempDir())
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.Secret,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1")
	log := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", bin, err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(m.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("MinIO (%s) did not come up on %s in 60 s: %v\n%s", bin, m.Endpoint, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": m.AccessKey, "AWS_SECRET_ACCESS_KEY": m.Secret, "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             filepath.Join(tb.TempDir(), "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(tb.TempDir(), "no-aws-credentials"),
	} {
		tb.Setenv(k, v)
	}
	return m
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Bucket creates the bucket name and returns its URL for segtune,
// s3://name?endpoint=…&use_path_style=true&region=us-east-1; a prefix is
// added after the bucket name: URL(prefix).
func (m *MinIO) Bucket(tb testing.TB, name string) func(prefix string) string {
	tb.Helper()
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(m.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(m.AccessKey, m.Secret, ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("creating bucket %s: %v", name, err)
	}
	q := url.Values{"endpoint": {m.Endpoint}, "use_path_style": {"true"}, "region": {"us-east-1"}}
	return func(prefix string) string {
		u := "s3://" + name
		if prefix != "" {
			u += "/" + prefix
		}
		return u + "?" + q.Encode()
	}
}
