//go:build !nos3

package storage

import (
	"context"
	"net/url"
	"os"
	"strings"

	_ "gocloud.dev/blob/s3blob" // s3://
)

func init() {
	backends["s3"] = func(_ context.Context, l Location) error {
		instanceMetadataOffForCustomEndpoint(l)
		return nil
	}
}

// instanceMetadataOffForCustomEndpoint turns off the AWS SDK's last
// credential source, the EC2 instance-metadata service (requests to
// 169.254.169.254), for a bucket on an S3-compatible server named by
// ?endpoint= or $AWS_ENDPOINT_URL(_S3): such a server does not take an EC2
// instance role's credentials, and without credentials the lookup would
// send requests off the machine. Endpoints under amazonaws.com (VPC
// endpoints) keep it, and so does an explicit $AWS_EC2_METADATA_DISABLED.
func instanceMetadataOffForCustomEndpoint(l Location) {
	const disabled = "AWS_EC2_METADATA_DISABLED"
	if os.Getenv(disabled) != "" {
		return
	}
	endpoint := ""
	if u, err := url.Parse(l.BucketURL); err == nil {
		endpoint = u.Query().Get("endpoint")
	}
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if endpoint == "" {
			endpoint = os.Getenv(v)
		}
	}
	if endpoint == "" {
		return
	}
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if strings.HasSuffix(host, ".amazonaws.com") || strings.HasSuffix(host, ".amazonaws.com.cn") {
		return
	}
	os.Setenv(disabled, "true")
}
