package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/connector/kafka"
)

// scaleOutStatus prints who holds what in a scale-out job's group, read
// from Kafka (it needs no instance's API): the instances (the group's
// members, named by their client ids), and per partition of every
// sub-topology its instance, committed offset, end offset, lag and the
// checkpoint its task committed last.
func scaleOutStatus(ctx context.Context, w io.Writer, jf *JobFile) error {
	cc, err := clientConfig(jf.Kafka)
	if err != nil {
		return err
	}
	cl, err := cc.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	segs, err := planSegments(jf)
	if err != nil {
		return err
	}
	var topics []string
	for _, s := range segs {
		topics = append(topics, s.topics...)
	}
	group := jf.Source.Group
	view, err := kafka.DescribeGroup(ctx, cc, group)
	if err != nil {
		return err
	}
	owner := map[string]string{}
	fmt.Fprintf(w, "job %s: scale-out, group %s (%s protocol, %s), %d instances\n", jf.Job, group, view.Protocol, view.State, len(view.Members))
	members := slices.Clone(view.Members)
	slices.SortFunc(members, func(a, b kafka.GroupMember) int { return strings.Compare(a.ClientID, b.ClientID) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tHOST\tPARTITIONS")
	for _, m := range members {
		var ps []string
		for _, p := range m.Partitions {
			owner[p.String()] = m.ClientID
			ps = append(ps, p.String())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.ClientID, m.Host, strings.Join(ps, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil && !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		return fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tINSTANCE\tCOMMITTED\tEND\tLAG\tCHECKPOINT")
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
			committed, lag, cp := "-", end.Offset, "-"
			if o, ok := offs.Lookup(t, p); ok && o.At >= 0 {
				committed, lag = fmt.Sprint(o.At), end.Offset-o.At
				if i := strings.LastIndexByte(o.Metadata, ':'); i >= 0 {
					cp = o.Metadata[i+1:]
				}
			}
			who := owner[fmt.Sprintf("%s/%d", t, p)]
			if who == "" {
				who = "(none)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\n", t, p, who, committed, end.Offset, lag, cp)
		}
	}
	return tw.Flush()
}
