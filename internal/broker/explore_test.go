package broker

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestExplore(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, _ := cmd.StdoutPipe()
	cmd.Start()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "READY") {
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Log(e.Name())
	}
	pl, _ := os.ReadFile(dir + "/pids.log")
	t.Logf("pids.log %q", pl)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir), kfake.WithLogger(kfake.BasicLogger(os.Stderr, kfake.LogLevelDebug)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	t.Logf("%+v", c.PartitionInfo("out", 0))
	p := txnProducer(t, addr, "job-0")
	produceInTxn(t, ctx, p, "out", "c3")
	if err := endTxn(ctx, p, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	t.Logf("%+v", c.PartitionInfo("out", 0))
	t.Logf("rc %q", readAll(t, ctx, addr, "out", kgo.ReadCommitted()))
	t.Logf("ru %q", readAll(t, ctx, addr, "out", kgo.ReadUncommitted()))
}
