package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txn list / txn abort: the "hanging transaction" that blocks every
// read_committed reader of the partitions it wrote, found and ended on
// purpose.

func txnFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	cluster := addClusterFlags(fs)
	older := fs.Duration("older-than", time.Minute, "txn list: show open transactions started longer ago than this")
	all := fs.Bool("all", false, "txn list: show every transactional id the brokers know, open or not")
	return func(ctx context.Context, e *env, args []string) error {
		args, err := verbFirst(fs, args)
		if err != nil {
			return err
		}
		if len(args) == 0 || (args[0] != "list" && args[0] != "abort") {
			return fmt.Errorf("%w: use txn list, or txn abort TRANSACTIONAL_ID", errUsage)
		}
		adm, _, closeFn, err := cluster.admin()
		if err != nil {
			return err
		}
		defer closeFn()
		if args[0] == "abort" {
			if len(args) != 2 {
				return fmt.Errorf("%w: txn abort takes one transactional id (txn list shows them)", errUsage)
			}
			d, err := adm.DescribeTransactions(ctx, args[1])
			if err != nil {
				return fmt.Errorf("describe transaction %s: %w", args[1], err)
			}
			if x, ok := d[args[1]]; !ok || x.Err != nil || x.State != "Ongoing" {
				state := "unknown to the brokers"
				if ok && x.Err == nil {
					state = x.State
				} else if ok {
					state = x.Err.Error()
				}
				return fmt.Errorf("%s has no open transaction (%s); nothing to abort", args[1], state)
			}
			return abortTxn(ctx, e, cluster, args[1])
		}
		var states []string
		if !*all {
			states = []string{"Ongoing"}
		}
		listed, err := adm.ListTransactions(ctx, nil, states)
		if err != nil {
			return fmt.Errorf("list transactions: %w", err)
		}
		ids := listed.TransactionalIDs()
		if len(ids) == 0 {
			fmt.Fprintln(e.stdout, "no open transactions")
			return nil
		}
		desc, err := adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return fmt.Errorf("describe transactions: %w", err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TRANSACTIONAL ID\tSTATE\tPRODUCER\tSTARTED\tOPEN FOR\tTIMEOUT\tPARTITIONS")
		now := time.Now()
		shown := 0
		for _, d := range desc.Sorted() {
			if d.Err != nil {
				fmt.Fprintf(tw, "%s\t%v\t\t\t\t\t\n", d.TxnID, d.Err)
				continue
			}
			open := d.State == "Ongoing" && d.StartTimestamp > 0
			age := now.Sub(time.UnixMilli(d.StartTimestamp))
			if !*all && (!open || age < *older) {
				continue
			}
			started, since := "-", "-"
			if open {
				started, since = time.UnixMilli(d.StartTimestamp).Format(time.RFC3339), age.Round(time.Second).String()
			}
			var parts []string
			for t, ps := range d.Topics {
				for p := range ps {
					parts = append(parts, fmt.Sprintf("%s/%d", t, p))
				}
			}
			slices.Sort(parts)
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%v\t%s\n", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, started, since,
				time.Duration(d.TimeoutMillis)*time.Millisecond, strings.Join(parts, ","))
			shown++
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if shown > 0 && !*all {
			fmt.Fprintln(e.stderr, "read_committed readers of these partitions wait until the transaction ends; txn abort ID ends one now")
		}
		return nil
	}
}

// abortTxn ends the transactional id's open transaction by initializing a
// producer with the id: the coordinator aborts the ongoing transaction and
// bumps the epoch, so the producer that opened it is fenced. An onceflow
// job using the id fails over and recovers from its last checkpoint.
func abortTxn(ctx context.Context, e *env, cluster clusterFlags, id string) error {
	cc, _, err := cluster.load()
	if err != nil {
		return err
	}
	cl, err := cc.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = -1, -1
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if errors.Is(err, kerr.ConcurrentTransactions) {
			// The coordinator is still writing the abort markers.
			select {
			case <-ctx.Done():
				return fmt.Errorf("abort %s: the coordinator did not finish ending the transaction: %w", id, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("abort the transaction of %s: %w", id, err)
		}
		fmt.Fprintf(e.stdout, "aborted the open transaction of %s (producer %d is now at epoch %d; the producer that opened it is fenced)\n", id, resp.ProducerID, resp.ProducerEpoch)
		return nil
	}
}
