package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// The commands that talk to a running job's REST API (onceflow run
// --http): status, checkpoints, savepoint, stop.

// apiClient is the common part of those commands' flags.
type apiClient struct {
	base, job, token string
	json             bool
	http             *http.Client
}

func apiFlags(fs *flag.FlagSet) func() (*apiClient, error) {
	url := fs.String("api", "http://127.0.0.1:8081", "`URL` of the running job's HTTP server (onceflow run --http)")
	job := fs.String("job", "", "the job's name (default: the job the server runs)")
	tokenFile := fs.String("token-file", "", "`FILE` holding the API token, for savepoint and stop ("+TokenEnv+" overrides it)")
	asJSON := fs.Bool("json", false, "print the API's JSON answer instead of a table")
	return func() (*apiClient, error) {
		c := &apiClient{base: strings.TrimRight(*url, "/"), job: *job, json: *asJSON, http: &http.Client{Timeout: 30 * time.Second}}
		c.token = os.Getenv(TokenEnv)
		if c.token == "" && *tokenFile != "" {
			b, err := os.ReadFile(*tokenFile)
			if err != nil {
				return nil, fmt.Errorf("--token-file: %w", err)
			}
			c.token = strings.TrimSpace(string(b))
		}
		return c, nil
	}
}

// call sends a request and decodes the JSON answer into out; an answer
// with an error status returns the API's message.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is the job running with --http, and is %s its address? set it with --api)", err, c.base)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct{ Errors []string }
		if json.Unmarshal(b, &e) == nil && len(e.Errors) > 0 {
			msg := strings.Join(e.Errors, "; ")
			if resp.StatusCode == http.StatusUnauthorized {
				msg += " (give it with --token-file or " + TokenEnv + ")"
			}
			return fmt.Errorf("%s %s: %s", method, path, msg)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// jobPath is /jobs/NAME, the name asked from the server when not given.
func (c *apiClient) jobPath(ctx context.Context) (string, error) {
	if c.job == "" {
		var o struct{ Jobs []struct{ Name string } }
		if err := c.call(ctx, "GET", "/jobs/overview", nil, &o); err != nil {
			return "", err
		}
		if len(o.Jobs) == 0 {
			return "", errors.New("the server runs no job")
		}
		c.job = o.Jobs[0].Name
	}
	return "/jobs/" + c.job, nil
}

// printJSON prints raw indented.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// getJob is a read command's GET of the job's path+suffix. With --json it
// prints the answer and returns nil; otherwise it returns the answer to
// print as a table. A nil answer ends the command with err.
func getJob(ctx context.Context, e *env, client func() (*apiClient, error), name, suffix string, args []string) (json.RawMessage, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%w: %s takes no arguments", errUsage, name)
	}
	c, err := client()
	if err != nil {
		return nil, err
	}
	p, err := c.jobPath(ctx)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.call(ctx, "GET", p+suffix, nil, &raw); err != nil {
		return nil, err
	}
	if c.json {
		return nil, printJSON(e.stdout, raw)
	}
	return raw, nil
}

func statusFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	client := apiFlags(fs)
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) == 1 {
			// onceflow status JOB.yaml: a scale-out job's instances and
			// partitions, from its group.
			jf, err := jobfile.LoadJobFile(args[0])
			if err != nil {
				return err
			}
			if !jf.ScaleOut.Enabled {
				return fmt.Errorf("%w: %s is not a scale-out job: onceflow status reads a running job through its API (--api URL) without a file", errUsage, args[0])
			}
			return scaleOutStatus(ctx, e.stdout, jf)
		}
		raw, err := getJob(ctx, e, client, "status", "", args)
		if raw == nil {
			return err
		}
		var d struct {
			Name, State string
			Duration    int64
			Records     map[string]int64
			Restarts    int64
			Vertices    []struct {
				ID          string
				Parallelism int
				InPerSec    float64 `json:"read-records-per-second"`
				OutPerSec   float64 `json:"write-records-per-second"`
				Busy        float64 `json:"busy-time-ms-per-second"`
				BP          float64 `json:"backpressured-time-ms-per-second"`
				Level       string  `json:"backpressure-level"`
				Operators   []struct {
					ID      string  `json:"id"`
					Percent float64 `json:"time-percent"`
				}
			}
			Lag      map[string]any
			ScaleOut *soStatus `json:"scale-out"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return err
		}
		w := e.stdout
		if d.ScaleOut != nil {
			return printScaleOutAPIStatus(ctx, w, client, d.Name, d.State, d.Records, d.Restarts, d.ScaleOut)
		}
		fmt.Fprintf(w, "job %s: %s for %v, %d restarts\n", d.Name, d.State, (time.Duration(d.Duration) * time.Millisecond).Round(time.Second), d.Restarts)
		fmt.Fprintf(w, "records: %d read, %d written, %d committed, %d skipped, %d dead-lettered\n",
			d.Records["read"], d.Records["written"], d.Records["committed"], d.Records["skipped"], d.Records["dead-lettered"])
		if parts, ok := d.Lag["partitions"].([]any); ok && len(parts) > 0 {
			var total float64
			for _, p := range parts {
				total += p.(map[string]any)["lag"].(float64)
			}
			fmt.Fprintf(w, "lag: %.0f records over %d partitions\n", total, len(parts))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tPARALLELISM\tIN/S\tWRITTEN/S\tBUSY\tBACKPRESSURE\tTIME IN OPERATORS")
		for _, v := range d.Vertices {
			// The share of the task's time in each operator of its chain
			// (docs/design.md, "Metrics and the REST API").
			ops := make([]string, 0, len(v.Operators))
			for _, op := range v.Operators {
				ops = append(ops, fmt.Sprintf("%s %.0f%%", op.ID, op.Percent))
			}
			if v.Level == "" {
				fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t- (measured after a few seconds)\t%s\n", v.ID, v.Parallelism, strings.Join(ops, ", "))
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f%%\t%s (%.0f%%)\t%s\n", v.ID, v.Parallelism, v.InPerSec, v.OutPerSec, v.Busy/10, v.Level, v.BP/10, strings.Join(ops, ", "))
		}
		return tw.Flush()
	}
}

func checkpointsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	client := apiFlags(fs)
	last := fs.Int("n", 10, "show the last `N` checkpoints")
	return func(ctx context.Context, e *env, args []string) error {
		raw, err := getJob(ctx, e, client, "checkpoints", "/checkpoints", args)
		if raw == nil {
			return err
		}
		var d struct {
			Counts  map[string]int64
			History []struct {
				ID        int64  `json:"id"`
				IDText    string `json:"id-text"`
				Task      string `json:"task"`
				Status    string `json:"status"`
				Savepoint bool   `json:"is_savepoint"`
				Trigger   int64  `json:"trigger_timestamp"`
				Duration  int64  `json:"end_to_end_duration"`
				Size      int64  `json:"state_size"`
				Written   int64  `json:"checkpointed_size"`
				Align     int64  `json:"alignment_duration"`
				Delay     int64  `json:"barrier_delay"`
				Failure   string `json:"failure_message"`
			}
			ScaleOut *struct {
				Instance string `json:"instance"`
			} `json:"scale-out"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "checkpoints: %d completed, %d failed, %d in progress\n", d.Counts["completed"], d.Counts["failed"], d.Counts["in_progress"])
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		if d.ScaleOut != nil {
			// A scale-out instance: its tasks' recent checkpoints, newest
			// first, ids as epoch:sequence (docs/design.md, "Scale-out").
			fmt.Fprintf(e.stdout, "(the checkpoints of the tasks of instance %s, newest first)\n", d.ScaleOut.Instance)
			fmt.Fprintln(tw, "TASK\tCHECKPOINT\tSTATUS\tTRIGGERED\tDURATION\tSIZE\tWRITTEN\tBARRIER\tALIGNMENT\t")
			for i, h := range d.History {
				if i == *last {
					break
				}
				kind := ""
				if h.Savepoint {
					kind = " (savepoint)"
				}
				fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t%dms\t%d\t%d\t%dms\t%dms\t%s\n", h.Task, flow.CheckpointText(h.ID), kind, h.Status, time.UnixMilli(h.Trigger).Format("15:04:05.000"), h.Duration, h.Size, h.Written, h.Delay, h.Align, h.Failure)
			}
			return tw.Flush()
		}
		fmt.Fprintln(tw, "ID\tSTATUS\tTRIGGERED\tDURATION\tSIZE\tWRITTEN\tBARRIER\tALIGNMENT\t")
		for i, h := range d.History {
			if i == *last {
				break
			}
			kind := ""
			if h.Savepoint {
				kind = " (savepoint)"
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%dms\t%d\t%d\t%dms\t%dms\t%s\n", flow.CheckpointText(h.ID), kind, h.Status, time.UnixMilli(h.Trigger).Format("15:04:05.000"), h.Duration, h.Size, h.Written, h.Delay, h.Align, h.Failure)
		}
		return tw.Flush()
	}
}

// savepointOp triggers a savepoint (or a stop with one) and waits for it,
// printing its progress.
func savepointOp(ctx context.Context, e *env, c *apiClient, kind, dir string) error {
	p, err := c.jobPath(ctx)
	if err != nil {
		return err
	}
	path := p + "/savepoints"
	if kind == "stop" {
		path = p + "/stop"
	}
	var started struct {
		ID string `json:"request-id"`
	}
	if err := c.call(ctx, "POST", path, map[string]string{"target-directory": dir}, &started); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "%s requested (%s); waiting for it to complete\n", kind, started.ID)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for waited := 0; ; waited++ {
		var st struct {
			Status    struct{ ID string }
			Operation struct {
				Location string
				Failure  string `json:"failure-cause"`
			}
		}
		if err := c.call(ctx, "GET", p+"/savepoints/"+started.ID, nil, &st); err != nil {
			if kind == "stop" && waited > 0 && strings.Contains(err.Error(), "connection refused") {
				return errors.New("the job stopped before it reported its savepoint; its log names the savepoint's directory")
			}
			return err
		}
		switch st.Status.ID {
		case "COMPLETED":
			fmt.Fprintln(e.stdout, st.Operation.Location)
			return nil
		case "FAILED":
			return fmt.Errorf("%s failed: %s", kind, st.Operation.Failure)
		}
		if waited > 0 && waited%25 == 0 {
			fmt.Fprintf(e.stderr, "%s %s still in progress after %ds\n", kind, started.ID, waited/5)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting; the %s goes on (poll %s%s/savepoints/%s)", kind, c.base, p, started.ID)
		case <-t.C:
		}
	}
}

func savepointFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	client := apiFlags(fs)
	dir := fs.String("dir", "", "the savepoint's `DIR` on the job's machine (default: STATE_DIR/JOB/savepoints/savepoint-TIME); of a scale-out job,\n"+
		"a directory every instance reaches, or with checkpoints on S3 an s3://bucket/key location (default: next to the checkpoints)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: savepoint takes no arguments (the directory is --dir)", errUsage)
		}
		c, err := client()
		if err != nil {
			return err
		}
		return savepointOp(ctx, e, c, "savepoint", *dir)
	}
}

func stopFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	client := apiFlags(fs)
	dir := fs.String("savepoint", "", "take the final savepoint into `DIR` on the job's machine (default: STATE_DIR/JOB/savepoints/savepoint-TIME); of a scale-out job,\n"+
		"a directory every instance reaches, or with checkpoints on S3 an s3://bucket/key location (default: next to the checkpoints)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: stop takes no arguments", errUsage)
		}
		c, err := client()
		if err != nil {
			return err
		}
		return savepointOp(ctx, e, c, "stop", *dir)
	}
}
