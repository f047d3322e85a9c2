package dbtest

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// proc is a server process the tests start, kill and stop.
type proc struct {
	cmd  *exec.Cmd
	done chan error // receives the process's exit
}

// launch starts cmd and watches for its exit.
func (p *proc) launch(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p.cmd, p.done = cmd, make(chan error, 1)
	go func() { p.done <- cmd.Wait() }()
	return nil
}

// kill SIGKILLs the process (a crash) and waits for it to end.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// terminate asks the process to stop (SIGTERM), and kills it after 30 s.
func (p *proc) terminate() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}
