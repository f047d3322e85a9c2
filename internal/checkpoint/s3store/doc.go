// Package s3store keeps a job's checkpoints in S3-compatible object
// storage, so that losing the machine does not lose the job's state. A job
// names it as
//
//	state: {checkpoints: s3://bucket/prefix}
//
// and its checkpoints live under s3://bucket/prefix/<job>/, laid out as a
// local state directory is (storage.CheckpointsDir): one key prefix
// checkpoints/chk-<id>/ per checkpoint holding its state files and its
// manifest, shared/ for the database files incremental checkpoints share,
// and STATE_ID. *Store implements storage.Storage with the semantics of the
// local store (docs/design.md, "The checkpoint protocol" and "External
// commit points: pending manifests"); the manifest codec, the state file
// format, the damage reports and the rules of Latest, GC and Confirm are
// package storage's, so both stores read and judge checkpoints alike.
//
// The commit point is the PUT of checkpoints/chk-<id>/_manifest, written
// after every state file: S3 creates an object only once its upload is
// complete (a multipart upload only once it is completed), so a checkpoint
// either has its whole manifest or none, and a state file whose upload
// failed is either absent or never named by a manifest. A pending manifest
// (_manifest.pending) is confirmed by writing the bytes whose checksum was
// just checked as _manifest, then deleting the pending object. Damage
// (a missing object, another size, another SHA-256, an unreadable manifest)
// is a *storage.CorruptError naming the object as s3://bucket/key.
// Savepoints stay local directories: CopyTo downloads a checkpoint into
// one, and a restore from one reads it from the local filesystem. A
// scale-out job's savepoints are kept in the bucket by Place (the
// scaleout.SavepointPlace of such a job; docs/design.md, "Savepoints of
// the whole job"): each task's savepoint is taken locally, uploaded, and
// downloaded into a local directory to be restored.
//
// # Pointing it at a server
//
// The store reads the same environment variables as the AWS tools:
//
//	AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL   the server, such as http://localhost:9000
//	                                        (default https://s3.amazonaws.com)
//	AWS_REGION, AWS_DEFAULT_REGION          the region (default us-east-1)
//	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
//	                                        the credentials; without them the shared
//	                                        credentials file (~/.aws/credentials and
//	                                        ~/.aws/config, AWS_SHARED_CREDENTIALS_FILE,
//	                                        AWS_CONFIG_FILE, AWS_PROFILE), then the IAM
//	                                        role of the EC2 instance, ECS task or EKS pod
//
// Options override the endpoint and the region. An endpoint URL says
// whether to use TLS (http:// or https://); a bare host[:port] uses TLS
// unless Options.Insecure is set. Buckets are addressed by host name
// (bucket.s3.amazonaws.com) on AWS and by path (host/bucket) elsewhere;
// PathStyle forces the path on any server. For a local MinIO:
//
//	mc mb local/onceflow                      # the bucket must exist
//	export AWS_ENDPOINT_URL=http://localhost:9000
//	export AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin
//	# and in the job file: state: {checkpoints: s3://onceflow/prod}
//
// SeaweedFS's S3 gateway (http://host:8333, keys from its s3.json) and
// Ceph's RGW work the same way. On AWS, leave the endpoint unset and set
// AWS_REGION to the bucket's region.
// The bucket must exist; Open checks that it does and that the
// credentials are accepted, and says what to fix otherwise. The
// credentials need s3:ListBucket on the bucket and s3:GetObject,
// s3:PutObject and s3:DeleteObject under the prefix. A lifecycle rule
// that aborts incomplete multipart uploads after a day reclaims the parts
// of uploads a crash interrupted.
//
// # Why minio-go
//
// The client is github.com/minio/minio-go/v7: one module, built on small
// libraries (hashing, compression, an ini reader), that speaks plain S3 to
// every compatible server and brings what this store needs: multipart
// uploads of large files, retries, the AWS credential chain. The AWS SDK
// for Go v2 would bring a dozen modules for the same (the SDK core,
// config, credentials, the S3 service and its upload manager, smithy-go
// and several internal ones), much of it for features only AWS has.
package s3store
