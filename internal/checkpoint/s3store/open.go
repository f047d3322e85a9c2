package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Options says how to reach the object storage. The zero value reads
// everything from the environment (see the package documentation).
type Options struct {
	// Endpoint is the server, as host[:port] or as a URL (http:// or
	// https://, no path); default AWS_ENDPOINT_URL_S3, then
	// AWS_ENDPOINT_URL, then s3.amazonaws.com.
	Endpoint string
	// Region is the bucket's region; default AWS_REGION, then
	// AWS_DEFAULT_REGION, then us-east-1.
	Region string
	// PathStyle addresses buckets as host/bucket rather than
	// bucket.host. It is the default for every server but AWS; MinIO,
	// SeaweedFS and most self-hosted servers want it.
	PathStyle bool
	// Insecure talks plain HTTP to an Endpoint given as host[:port]
	// (only for local test servers). An endpoint URL says it itself.
	Insecure bool
	// Transport, if not nil, carries the requests (for a proxy, a private
	// certificate authority or tests).
	Transport http.RoundTripper
	// MaxRetries is how often a failed request is tried in all; 0 means
	// the client's default (10), 1 no retries.
	MaxRetries int

	// partSize is the size of the parts of multipart uploads, which also
	// starts them (tests use small parts); 0 means the client's default
	// (16 MiB, at least 5 MiB).
	partSize uint64
}

// The credentials come from minio-go's providers, in the order the AWS
// tools use: the environment, the shared credentials and config files,
// the IAM role of the machine, task or pod.
func (o Options) credentials() *credentials.Credentials {
	return credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{},
	})
}

// endpoint returns the server's host[:port] and whether to use TLS.
func (o Options) endpoint() (host string, secure bool, err error) {
	ep, from := o.Endpoint, "the endpoint"
	for _, env := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if ep == "" {
			ep, from = os.Getenv(env), env
		}
	}
	if ep == "" {
		return "s3.amazonaws.com", true, nil
	}
	if !strings.Contains(ep, "://") {
		if strings.ContainsAny(ep, "/?#") {
			return "", false, fmt.Errorf("s3store: %s %q is not host[:port] or an http:// or https:// URL", from, ep)
		}
		return ep, !o.Insecure, nil
	}
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("s3store: %s %q is not a URL: %w", from, ep, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("s3store: %s %q: the scheme must be http or https", from, ep)
	case u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "":
		return "", false, fmt.Errorf("s3store: %s %q must name only the server, such as http://localhost:9000 (the bucket and prefix go in the s3:// URL)", from, ep)
	}
	return u.Host, u.Scheme == "https", nil
}

func (o Options) region() string {
	for _, r := range []string{o.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")} {
		if r != "" {
			return r
		}
	}
	return "us-east-1"
}

// ParseURL splits "s3://bucket/prefix" into the bucket and the key prefix
// (without slashes around it; empty for the bucket's top).
func ParseURL(u string) (bucket, prefix string, err error) {
	const form = "s3://bucket or s3://bucket/prefix"
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return "", "", fmt.Errorf("s3store: %q is not an S3 location; write it as %s", u, form)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return "", "", fmt.Errorf("s3store: %q: %q is not a bucket name (%v); write the location as %s", u, bucket, err, form)
	}
	parts := strings.Split(prefix, "/")
	if strings.ContainsAny(prefix, "?#\\") || prefix != "" && (slices.Contains(parts, "") || slices.Contains(parts, ".") || slices.Contains(parts, "..")) {
		return "", "", fmt.Errorf("s3store: %q: the prefix %q must be a plain path (no //, . or .. parts, ?, # or \\); write the location as %s", u, prefix, form)
	}
	return bucket, prefix, nil
}

// Open returns the storage of job's checkpoints under
// s3://bucket/prefix/<job>/ (url is s3://bucket/prefix). It checks that
// the bucket exists and that the server accepts the credentials, and fails
// with an error that says what to fix. ctx bounds only this check.
func Open(ctx context.Context, url, job string, o Options) (*Store, error) {
	if job == "" || strings.ContainsAny(job, "/\\") || job == "." || job == ".." {
		if _, _, err := ParseURL(url); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("s3store: job name %q cannot name a key prefix: use a name without slashes", job)
	}
	s, err := dial(url, o)
	if err != nil {
		return nil, err
	}
	s.root = path.Join(s.root, job)
	if err := s.checkAccess(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// dial makes the client of the server url (s3://bucket/prefix) is on, and
// a Store whose root is prefix. It sends no request.
func dial(url string, o Options) (*Store, error) {
	bucket, prefix, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	host, secure, err := o.endpoint()
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	region := o.region()
	mo := &minio.Options{
		Creds:        o.credentials(),
		Secure:       secure,
		Region:       region,
		BucketLookup: lookup,
		Transport:    o.Transport,
		MaxRetries:   o.MaxRetries,
	}
	if o.partSize > 0 {
		mo.UploadLimits = &minio.UploadLimits{MinPartSize: int64(o.partSize)}
	}
	client, err := minio.New(host, mo)
	if err != nil {
		return nil, fmt.Errorf("s3store: %s: %w", url, err)
	}
	return &Store{client: client, bucket: bucket, root: prefix, endpoint: client.EndpointURL().String(), region: region, partSize: o.partSize, staleUpload: DefaultStaleUpload}, nil
}

// checkAccess lists one key under the root: a request that needs the bucket
// and accepted credentials, and whose error answer names the problem.
func (s *Store) checkAccess(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var err error
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.root + "/", MaxKeys: 1}) {
		err = obj.Err
		break
	}
	if err == nil {
		return nil
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "NoSuchBucket":
		return fmt.Errorf("s3store: the bucket %q does not exist on %s: create it (mc mb, aws s3 mb s3://%s) or name an existing one in the checkpoints location", s.bucket, s.endpoint, s.bucket)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidSecurity":
		return fmt.Errorf("s3store: %s refused the credentials (%s: %s; %s): %s", s.endpoint, resp.Code, resp.Message, s.whichCredentials(), credentialsHelp)
	case "AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException":
		return fmt.Errorf("s3store: %s: the bucket %q is not in region %s (%s: %s): set AWS_REGION to the bucket's region", s.endpoint, s.bucket, s.region, resp.Code, resp.Message)
	case "AccessDenied", "AllAccessDisabled":
		if v, verr := s.client.GetCreds(); verr == nil && v.AccessKeyID == "" {
			return fmt.Errorf("s3store: %s denied access to %s and no credentials were found: %s", s.endpoint, s.Root(), credentialsHelp)
		}
		return fmt.Errorf("s3store: %s denied access to %s (%s; %s): the credentials need s3:ListBucket on the bucket and s3:GetObject, s3:PutObject and s3:DeleteObject under the prefix", s.endpoint, s.Root(), resp.Message, s.whichCredentials())
	}
	if resp.StatusCode == 0 && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("s3store: cannot reach %s: %w; check the endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL) and whether it speaks http or https", s.endpoint, err)
	}
	return fmt.Errorf("s3store: checking access to %s on %s: %w", s.Root(), s.endpoint, err)
}

const credentialsHelp = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) to a key the server accepts, " +
	"or name a profile of the shared credentials file (~/.aws/credentials, AWS_PROFILE), or run with an IAM role"

// whichCredentials says which access key was used and where it came from,
// never the secret.
func (s *Store) whichCredentials() string {
	v, err := s.client.GetCreds()
	if err != nil || v.AccessKeyID == "" {
		return "no credentials found"
	}
	from := "the shared credentials file or an IAM role"
	for _, env := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"} {
		if os.Getenv(env) == v.AccessKeyID {
			from = env
			break
		}
	}
	return fmt.Sprintf("access key %s from %s", v.AccessKeyID, from)
}
