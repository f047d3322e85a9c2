package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/flow"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// groupStatus is who holds what in a scale-out job's group, read from
// Kafka (it needs no instance's API): the instances (the group's members,
// named by their client ids) and every sub-topology partition with its
// instance, committed offset, end offset, lag and its task's last
// checkpoint. onceflow status prints it; an instance's /group serves it.
type groupStatus struct {
	Job        string            `json:"job"`
	Group      string            `json:"group"`
	Protocol   string            `json:"protocol"`
	State      string            `json:"state"`
	Instances  []instanceStatus  `json:"instances"`
	Partitions []partitionStatus `json:"partitions"`
}

type instanceStatus struct {
	Name       string   `json:"name"`
	Host       string   `json:"host"`
	Partitions []string `json:"partitions"`
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
	for _, m := range view.Members {
		in := instanceStatus{Name: m.ClientID, Host: m.Host, Partitions: []string{}}
		for _, p := range m.Partitions {
			owner[p] = m.ClientID
			in.Partitions = append(in.Partitions, p.String())
		}
		st.Instances = append(st.Instances, in)
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
			ps := partitionStatus{Topic: t, Partition: p, Instance: owner[kafka.Partition{Topic: t, Partition: p}], Committed: -1, End: end.Offset, Lag: end.Offset}
			if o, ok := offs.Lookup(t, p); ok && o.At >= 0 {
				ps.Committed, ps.Lag = o.At, end.Offset-o.At
				if i := strings.LastIndexByte(o.Metadata, ':'); i >= 0 {
					ps.Checkpoint = o.Metadata[i+1:]
					if id, err := strconv.ParseInt(ps.Checkpoint, 10, 64); err == nil {
						ps.CheckpointText = flow.CheckpointText(id)
					}
				}
			}
			st.Partitions = append(st.Partitions, ps)
		}
	}
	return st, nil
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
	fmt.Fprintln(tw, "INSTANCE\tHOST\tPARTITIONS")
	for _, in := range st.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", in.Name, in.Host, strings.Join(in.Partitions, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tINSTANCE\tCOMMITTED\tEND\tLAG\tCHECKPOINT")
	for _, p := range st.Partitions {
		who, committed, cp := p.Instance, "-", p.CheckpointText
		if who == "" {
			who = "(none)"
		}
		if p.Committed >= 0 {
			committed = strconv.FormatInt(p.Committed, 10)
		}
		if cp == "" {
			cp = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\n", p.Topic, p.Partition, who, committed, p.End, p.Lag, cp)
	}
	return tw.Flush()
}
