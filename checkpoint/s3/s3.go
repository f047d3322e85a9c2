// Package s3 keeps a job's checkpoints in S3-compatible object storage, so
// that losing the machine does not lose the state (docs/design.md, "State
// and checkpoints"). It is a package of its own so that programs keeping
// checkpoints on local disk link no S3 client.
package s3

import (
	"context"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/checkpoint/s3store"
)

// Options configures Checkpoints: Endpoint, Region, PathStyle, Insecure
// (plain HTTP to a local test server), Transport, MaxRetries. Credentials
// come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
// then the shared credentials file, then the machine's IAM role.
type Options = s3store.Options

// Checkpoints keeps the job's checkpoints and savepoints' sources under
// url/<job> (url is s3://bucket/prefix). flow.StateDir is still needed: it
// holds the instance lock and the state backend's working files. The
// bucket must exist; access is checked when the job starts.
func Checkpoints(url string, o Options) flow.Option {
	return flow.CheckpointStorage(func(_, job string) (flow.CheckpointStore, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return s3store.Open(ctx, url, job, o)
	})
}

// Place keeps a scale-out job's savepoints in object storage (see
// SavepointPlace).
type Place = s3store.Place

// SavepointPlace is the place a scale-out job whose checkpoints are
// under url (s3://bucket/prefix, as given to Checkpoints) keeps its job
// savepoints in: scaleout.Config.SavepointPlace. The savepoints, and the
// objects their instances coordinate through, go under
// url/<job>.savepoints/ unless a savepoint names another s3:// location
// (docs/design.md, "Savepoints of the whole job"). It checks that the
// bucket exists and the credentials are accepted; ctx bounds the check.
func SavepointPlace(ctx context.Context, url string, o Options) (*Place, error) {
	return s3store.OpenPlace(ctx, url, o)
}
