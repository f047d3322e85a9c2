package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
	"github.com/onceflow/onceflow/scaleout"
)

// groupStatus is who holds what in a scale-out job's group, read from
// Kafka (it needs no instance's API): the instances (the group's members,
// named by their client ids) and every sub-topology partition with its
// instance, committed offset, end offset, lag and its task's last
// checkpoint; and, from the reports the instances write into the shared
// checkpoint directory (scaleout.ReadInstanceReports), each partition's
// task as its instance runs it: its state, newest checkpoint, restarts
// and problem. onceflow status prints it; an instance's /group serves it.
type groupStatus struct {
	Job        string            `json:"job"`
	Group      string            `json:"group"`
	Protocol   string            `json:"protocol"`
	State      string            `json:"state"`
	Instances  []instanceStatus  `json:"instances"`
	Partitions []partitionStatus `json:"partitions"`
	// Reports says where the tasks' states come from, or why they are
	// not shown.
	Reports string `json:"reports"`
}

type instanceStatus struct {
	Name       string   `json:"name"`
	Host       string   `json:"host"`
	Partitions []string `json:"partitions"`
	// Member says the group has the instance as a member; an instance
	// whose fresh report is all there is (it is joining, or it lost its
	// membership and its tasks are stopping) is not one.
	Member bool `json:"member"`
	// Tasks and Running count the tasks the instance's report lists and
	// those of them that run; Report is when it wrote it ("" for none),
	// Stale says it is old (the instance is gone, paused or cannot
	// write), Failed is the failure that stops it.
	Tasks   int    `json:"tasks"`
	Running int    `json:"running"`
	Report  string `json:"report,omitempty"`
	Stale   bool   `json:"stale,omitempty"`
	Failed  string `json:"failed,omitempty"`
}

type partitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Instance  string `json:"instance"`  // "" when none holds it
	Committed int64  `json:"committed"` // -1: nothing committed
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	// Checkpoint is the task's checkpoint that committed the offset;
	// CheckpointText the same for people, epoch:sequence
	// (flow.CheckpointText).
	Checkpoint     string `json:"checkpoint"`
	CheckpointText string `json:"checkpoint-text,omitempty"`
	// Task is the partition's task; State its state on its instance
	// (scaleout.TaskReport.State; "" when no fresh report of the
	// instance holding the partition lists it), with its restarts,
	// problem. When
	// the instance's report is fresh, Checkpoint is the task's newest
	// (a task whose database is its commit point commits its offsets
	// after it).
	Task     string `json:"task"`
	State    string `json:"state,omitempty"`
	Restarts int64  `json:"restarts"`
	Problem  string `json:"problem,omitempty"`
}

func readGroupStatus(ctx context.Context, cc kafka.ClientConfig, jf *jobfile.JobFile) (groupStatus, error) {
	segs, err := jobfile.PlanSegments(jf)
	if err != nil {
		return groupStatus{}, err
	}
	var topics []string
	for _, s := range segs {
		topics = append(topics, s.Topics...)
	}
	group := jf.Source.Group
	view, err := kafka.DescribeGroup(ctx, cc, group)
	if err != nil {
		return groupStatus{}, err
	}
	st := groupStatus{Job: jf.Job, Group: group, Protocol: view.Protocol, State: view.State}
	owner := map[kafka.Partition]string{}
	members := map[string]bool{}
	for _, m := range view.Members {
		in := instanceStatus{Name: m.ClientID, Host: m.Host, Partitions: []string{}, Member: true}
		for _, p := range m.Partitions {
			owner[p] = m.ClientID
			in.Partitions = append(in.Partitions, p.String())
		}
		members[m.ClientID] = true
		st.Instances = append(st.Instances, in)
	}
	// What each instance runs, from its report (fresh ones only).
	tasks := map[kafka.Partition]scaleout.TaskReport{}
	taskOf := map[kafka.Partition]string{}
	now := time.Now()
	reports, rerr := readReports(jf)
	switch {
	case strings.Contains(jf.State.Checkpoints, "://"):
		st.Reports = "the instances write no reports to object storage: tasks' states are not shown"
	case rerr != nil:
		st.Reports = "the instances' reports: " + rerr.Error()
	default:
		st.Reports = "the instances' reports in " + filepath.Join(jf.State.Checkpoints, jf.Job+".savepoints", "instances")
	}
	for _, r := range reports {
		i := slices.IndexFunc(st.Instances, func(in instanceStatus) bool { return in.Name == r.Instance })
		if i < 0 {
			if r.Stopped || r.Stale(now) {
				continue // gone, and not in the group
			}
			st.Instances = append(st.Instances, instanceStatus{Name: r.Instance, Partitions: []string{}})
			i = len(st.Instances) - 1
		}
		in := &st.Instances[i]
		in.Report, in.Stale, in.Failed = r.Updated.Format(time.RFC3339), r.Stale(now), r.Failed
		if r.Stopped {
			in.Stale = true
			continue
		}
		in.Tasks = len(r.Tasks)
		for _, t := range r.Tasks {
			if t.State == "running" {
				in.Running++
			}
			p := kafka.Partition{Topic: t.Topic, Partition: t.Partition}
			// The holder's report speaks for the partition; without one, a
			// member's that still lists it (say the task is stopping).
			if !in.Stale && (owner[p] == r.Instance || taskOf[p] == "") {
				tasks[p], taskOf[p] = t, r.Instance
			}
		}
	}
	slices.SortFunc(st.Instances, func(a, b instanceStatus) int { return strings.Compare(a.Name, b.Name) })
	cl, err := cc.NewClient()
	if err != nil {
		return st, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return st, fmt.Errorf("end offsets: %w", err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil && !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		return st, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	for _, t := range topics {
		var ps []int32
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == t {
				ps = append(ps, o.Partition)
			}
		})
		slices.Sort(ps)
		for _, p := range ps {
			end, _ := ends.Lookup(t, p)
			kp := kafka.Partition{Topic: t, Partition: p}
			ps := partitionStatus{Topic: t, Partition: p, Instance: owner[kp], Committed: -1, End: end.Offset, Lag: end.Offset,
				Task: scaleout.TaskName(jf.Job, kp)}
			if o, ok := offs.Lookup(t, p); ok && o.At >= 0 {
				ps.Committed, ps.Lag = o.At, end.Offset-o.At
				if i := strings.LastIndexByte(o.Metadata, ':'); i >= 0 {
					ps.Checkpoint = o.Metadata[i+1:]
					if id, err := strconv.ParseInt(ps.Checkpoint, 10, 64); err == nil {
						ps.CheckpointText = flow.CheckpointText(id)
					}
				}
			}
			if tr, ok := tasks[kp]; ok {
				ps.State, ps.Restarts, ps.Problem = tr.State, tr.Restarts, tr.Problem
				if ps.Instance == "" {
					ps.Instance = taskOf[kp]
				}
				if old, _ := strconv.ParseInt(ps.Checkpoint, 10, 64); tr.Checkpoint > old {
					ps.Checkpoint, ps.CheckpointText = strconv.FormatInt(tr.Checkpoint, 10), tr.CheckpointText
				}
			}
			st.Partitions = append(st.Partitions, ps)
		}
	}
	return st, nil
}

// readReports reads the instances' reports from the job's shared
// checkpoint directory; none with object storage.
func readReports(jf *jobfile.JobFile) ([]scaleout.InstanceReport, error) {
	if jf.State.Checkpoints == "" || strings.Contains(jf.State.Checkpoints, "://") {
		return nil, nil
	}
	return scaleout.ReadInstanceReports(jf.State.Checkpoints, jf.Job)
}

// scaleOutStatus prints groupStatus.
func scaleOutStatus(ctx context.Context, w io.Writer, jf *jobfile.JobFile) error {
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	st, err := readGroupStatus(ctx, cc, jf)
	if err != nil && st.Group == "" {
		return err
	}
	return printGroupStatus(w, st, err)
}

// printGroupStatus prints st; err is what went wrong reading its
// partitions (its instances are printed first).
func printGroupStatus(w io.Writer, st groupStatus, err error) error {
	fmt.Fprintf(w, "job %s: scale-out, group %s (%s protocol, %s), %d instances\n", st.Job, st.Group, st.Protocol, st.State, len(st.Instances))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tHOST\tTASKS\tREPORT\tPARTITIONS")
	for _, in := range st.Instances {
		tasks, report := "-", "-"
		if in.Report != "" {
			tasks, report = fmt.Sprintf("%d running of %d", in.Running, in.Tasks), in.Report
			if in.Stale {
				report += " (stale)"
			}
		}
		parts := strings.Join(in.Partitions, " ")
		if !in.Member {
			parts = "(not a member of the group)"
		}
		if in.Failed != "" {
			parts += " FAILED: " + in.Failed
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, in.Host, tasks, report, parts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tTASK\tINSTANCE\tSTATE\tCHECKPOINT\tCOMMITTED\tEND\tLAG\tRESTARTS\tPROBLEM")
	for _, p := range st.Partitions {
		who, committed, cp, state := p.Instance, "-", p.CheckpointText, p.State
		if who == "" {
			who = "(none)"
		}
		if p.Committed >= 0 {
			committed = strconv.FormatInt(p.Committed, 10)
		}
		if cp == "" {
			cp = "-"
		}
		if state == "" {
			state = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", p.Topic, p.Partition, p.Task, who, state, cp, committed, p.End, p.Lag, p.Restarts, p.Problem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.Reports != "" {
		fmt.Fprintf(w, "(tasks' states: %s)\n", st.Reports)
	}
	return nil
}
