package scaleout_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	s3ckpt "github.com/onceflow/onceflow/checkpoint/s3"
	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/broker"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/s3test"
	"github.com/onceflow/onceflow/scaleout"
)

var _ scaleout.SavepointPlace = (*s3ckpt.Place)(nil)

// A job savepoint of a scale-out job whose checkpoints are in object
// storage (docs/design.md, "Savepoints of the whole job"): the request,
// the tasks' results, the manifest, the restore markers and the tasks'
// savepoints all live in the bucket, under <prefix>/<job>.savepoints/.
// A count of two stages takes a running savepoint (a pause) and then
// stops with a savepoint on two instances, starts
// from it on one, stops with a savepoint again (into a named s3://
// location) and starts from that on three: every key's counts come out
// exactly 1..n, read committed, so each restore carried every task's
// state and offsets. A job savepoint whose manifest or task savepoint is
// damaged or missing is refused naming the object as s3://bucket/key.
func TestJobSavepointInObjectStorage(t *testing.T) {
	c := kafkatest.Start(t, broker.Config{Topics: map[string]int32{"in": 2, "out": 2}})
	srv := s3test.Start(t, true)
	o := s3ckpt.Options{Endpoint: srv.URL, Transport: srv.Transport}
	// Each run keeps its checkpoints under a prefix of its own, and its
	// instances their state in new directories, as a job moved to new
	// machines and storage does: what a run starts from is the job
	// savepoint alone, not the checkpoints of the run before.
	urlOf := func(run int) string { return "s3://" + s3test.Bucket + "/ck" + strconv.Itoa(run) }
	url := urlOf(1)
	place, err := s3ckpt.SavepointPlace(t.Context(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := 1
	const repart = "s3sp-by-key"
	stages := countStages(repart, "out")
	type inst struct {
		in     *scaleout.Instance
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name, from string) *inst {
		url := urlOf(run)
		place, err := s3ckpt.SavepointPlace(t.Context(), url, o)
		if err != nil {
			t.Fatal(err)
		}
		in, err := scaleout.New(scaleout.Config{Job: "s3sp", Client: kafka.ClientConfig{Brokers: []string{c.Addr}}, Instance: name,
			StateDir: filepath.Join(dir, "state"+strconv.Itoa(run)), Checkpoints: url, CheckpointStorage: s3ckpt.Checkpoints(url, o), SavepointPlace: place,
			Stages: stages, FromSavepoint: from, SavepointTimeout: 30 * time.Second, RepartitionPartitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		i := &inst{in: in, cancel: cancel, done: make(chan error, 1)}
		go func() { i.done <- in.Run(ctx) }()
		t.Cleanup(cancel)
		return i
	}
	wait := func(what string, is ...*inst) {
		t.Helper()
		for _, i := range is {
			select {
			case err := <-i.done:
				if err != nil {
					t.Fatalf("%s: instance: %v", what, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("%s: an instance did not stop", what)
			}
		}
	}
	const keys = 10
	total := map[string]int{}
	next := 0
	pcl := c.Client(t)
	produce := func(n int) {
		t.Helper()
		var rs []*kgo.Record
		for range n {
			k := "k" + strconv.Itoa(next%keys)
			rs = append(rs, &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte("v" + strconv.Itoa(next))})
			total[k]++
			next++
		}
		if err := pcl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(c.Client(t))
	caughtUp := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !kafkatest.CaughtUp(t.Context(), adm, "s3sp", "in") || !kafkatest.CaughtUp(t.Context(), adm, "s3sp", repart); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not caught up within a minute", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// spread waits until every instance runs a task: the restore is
	// taken up by all of them.
	spread := func(what string, is ...*inst) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			n := 0
			for _, i := range is {
				for _, ts := range i.in.Tasks() {
					if ts.Running {
						n++
						break
					}
				}
			}
			if n == len(is) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of %d instances run tasks", what, n, len(is))
			}
		}
	}
	stopWithSavepoint := func(what string, i *inst, to string, all ...*inst) (string, *scaleout.JobSavepoint) {
		t.Helper()
		sp, err := i.in.Savepoint(t.Context(), to, true)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		wait(what, all...)
		m, err := scaleout.LoadJobSavepointFrom(place, sp)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if m.Kind != "stop" || len(m.Tasks) != 5 || m.Dir != sp {
			t.Fatalf("%s: job savepoint %s: kind %s, %d tasks; want a stop of 5 tasks (2 of in, 3 of %s): %+v", what, sp, m.Kind, len(m.Tasks), repart, m.Tasks)
		}
		for _, tk := range m.Tasks {
			if objs, err := place.List(place.Join(sp, tk.Dir)); err != nil || !slices.Contains(objs, "_manifest") {
				t.Fatalf("%s: task %s's savepoint %s in the bucket: %v, %v", what, tk.Task, place.Join(sp, tk.Dir), objs, err)
			}
		}
		return sp, m
	}

	// Run 1: two instances; stop with a savepoint into the default
	// location, next to the checkpoints.
	produce(200)
	a, b := start("a", ""), start("b", "")
	spread("run 1", a, b)
	caughtUp("run 1")
	// A running savepoint first: the stages pause in turn, take theirs
	// (uploaded) and run on.
	sp0, err := b.in.Savepoint(t.Context(), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := scaleout.LoadJobSavepointFrom(place, sp0); err != nil || m.Kind != "savepoint" || len(m.Tasks) != 5 {
		t.Fatalf("the running savepoint %s: %v, %+v", sp0, err, m)
	}
	produce(100)
	caughtUp("run 1, after the running savepoint")
	sp1, _ := stopWithSavepoint("run 1", a, "", a, b)
	if !strings.HasPrefix(sp1, url+"/s3sp.savepoints/savepoint-") {
		t.Errorf("the default job savepoint is %s; want it under %s/s3sp.savepoints/", sp1, url)
	}
	// Run 2: one instance from it, more input; stop into a named
	// location.
	produce(150)
	run = 2
	a = start("a", sp1)
	caughtUp("run 2")
	sp2url := "s3://" + s3test.Bucket + "/elsewhere/sp2"
	sp2, _ := stopWithSavepoint("run 2", a, sp2url, a)
	if sp2 != sp2url {
		t.Errorf("the named job savepoint is %s, want %s", sp2, sp2url)
	}
	// Run 3: three instances from it, more input.
	run = 3
	is := []*inst{start("a", sp2), start("b", sp2), start("c", sp2)}
	spread("run 3", is...)
	produce(150)
	caughtUp("run 3")
	time.Sleep(500 * time.Millisecond)
	for _, i := range is {
		i.cancel()
	}
	wait("run 3", is...)
	seq := map[string][]int{}
	for _, r := range c.ReadCommittedRecords(t, "out") {
		n, err := strconv.Atoi(string(r.Value))
		if err != nil {
			t.Fatal(err)
		}
		seq[string(r.Key)] = append(seq[string(r.Key)], n)
	}
	for k, want := range total {
		got := seq[k]
		ok := len(got) == want
		for i := 0; ok && i < len(got); i++ {
			ok = got[i] == i+1
		}
		if !ok {
			t.Errorf("key %s: counted %d records as %v; want 1..%d", k, len(got), got, want)
		}
	}
	// The restore of a job of two stages fixed a restore marker in the
	// bucket, next to the request.
	ctl, err := place.List(urlOf(2) + "/s3sp.savepoints")
	if err != nil || !slices.Contains(ctl, "restore-000001.json") || !slices.Contains(ctl, "request.json") {
		t.Errorf("the control objects of run 2: %v, %v; want request.json and a restore marker", ctl, err)
	}

	// Damage. A missing manifest, and one that is not JSON, are named.
	if _, err := scaleout.LoadJobSavepointFrom(place, url+"/nothing-here"); err == nil || !strings.Contains(err.Error(), url+"/nothing-here holds no job savepoint") {
		t.Errorf("a location without a job savepoint: %v", err)
	}
	if err := place.WriteFile(place.Join(sp2, scaleout.SavepointManifestName), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	a = start("a", sp2)
	select {
	case err := <-a.done:
		if err == nil || !strings.Contains(err.Error(), sp2+"/"+scaleout.SavepointManifestName) || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("restoring a job savepoint whose manifest is damaged: %v; want it refused naming %s/%s", err, sp2, scaleout.SavepointManifestName)
		}
	case <-time.After(time.Minute):
		t.Fatal("an instance restoring a damaged job savepoint did not stop")
	}
	// A task savepoint missing an object is damaged, named by its key:
	// one of the counting stage's, which hold state files.
	task := place.Join(sp1, "s3sp-"+repart+"-0")
	objs, err := place.List(task)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, o := range objs {
		if o != "_manifest" {
			victim = o
		}
	}
	if victim == "" {
		t.Fatalf("task savepoint %s holds %v: no state file to remove", task, objs)
	}
	if err := deleteObject(t, srv, task+"/"+victim); err != nil {
		t.Fatal(err)
	}
	err = place.Download(task, filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), task+"/"+victim) {
		t.Errorf("downloading a task savepoint without %s: %v; want it damaged, naming %s/%s", victim, err, task, victim)
	}
	if err := place.Download(place.Join(sp1, "no-such-task"), filepath.Join(t.TempDir(), "y")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), sp1+"/no-such-task") {
		t.Errorf("downloading a missing task savepoint: %v", err)
	}
}

// deleteObject removes the object at loc (s3://bucket/key) with a client
// of the test's own: the place deletes nothing.
func deleteObject(t *testing.T, srv *s3test.Server, loc string) error {
	t.Helper()
	cl, err := minio.New(strings.TrimPrefix(srv.URL, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3test.AccessKey, s3test.SecretKey, ""), Secure: true, Region: "us-east-1", Transport: srv.Transport})
	if err != nil {
		return err
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(loc, "s3://"), "/")
	return cl.RemoveObject(t.Context(), bucket, key, minio.RemoveObjectOptions{})
}
