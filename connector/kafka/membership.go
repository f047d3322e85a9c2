package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition names one partition of a topic.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) String() string { return split{p.Topic, p.Partition}.String() }

// MembershipConfig configures a [Membership].
type MembershipConfig struct {
	Client ClientConfig
	// Group is the consumer group the instances of a job share.
	Group string
	// Topics are the topics whose partitions the group assigns.
	Topics []string
	// Instance names this member in the group (its client id, shown by
	// DescribeGroups and `onceflow status`), default the client's.
	Instance string
	// OnAssigned is called with partitions the member was given. It runs
	// in the member's group-management goroutine and should return soon
	// (start work, do not wait for it).
	OnAssigned func(ctx context.Context, ps []Partition)
	// OnRevoked is called with partitions the member gives up in a
	// rebalance; the rebalance waits for it (within the rebalance
	// timeout), so that the work on them can end with a commit.
	OnRevoked func(ctx context.Context, ps []Partition)
	// OnLost is called with partitions the member lost without a
	// rebalance (it was expelled from the group, say after a pause):
	// another member may own them already; nothing may be committed.
	OnLost func(ctx context.Context, ps []Partition)
	// SessionTimeout is how long the group waits for a silent member
	// before it moves its partitions, default 10s; brokers accept 6s to
	// 30 min by default (group.min/max.session.timeout.ms).
	SessionTimeout time.Duration
	// RebalanceTimeout bounds a rebalance, OnRevoked included, default
	// 60s.
	RebalanceTimeout time.Duration
	// NextGen speaks KIP-848's consumer group protocol when every broker
	// has it (the coordinator assigns partitions, incrementally), else the
	// classic protocol with the cooperative-sticky assignor.
	NextGen bool
	// DiscoveryInterval is how soon partitions added to Topics are
	// assigned, default DefaultDiscoveryInterval; negative leaves it to
	// the Kafka client (5 minutes). Under the classic protocol the group
	// leader assigns what its metadata knows, refreshed this often; under
	// KIP-848 the coordinator assigns them at a heartbeat anyway.
	DiscoveryInterval time.Duration
	Logger            *slog.Logger
}

// Membership is one member of a consumer group that fetches no records:
// the group's cooperative-sticky assignment tells the instance which
// partitions it works on (docs/design.md, "Scale-out"). Create it with
// [NewMembership]; it joins the group at once and leaves it at Close.
type Membership struct {
	cfg MembershipConfig
	cl  *kgo.Client

	mu    sync.Mutex
	owned map[Partition]bool
	// away holds the partitions Reconcile dropped as lost while the
	// member's own client still held them: if the group's view later
	// says the member holds one of them, the client will not assign it
	// again (for it, nothing changed), so Reconcile gives it back.
	away map[Partition]bool
	// ids caches topic ids for CommitOffsets.
	ids  map[string]kadm.TopicID
	done chan struct{}
	// protocol names the group protocol the member speaks.
	protocol string
}

// Protocol names the group protocol the member speaks: the consumer
// protocol of KIP-848, or the classic one with the cooperative-sticky
// assignor.
func (m *Membership) Protocol() string { return m.protocol }

// supportsNextGenGroups asks the brokers whether they speak KIP-848's
// consumer group protocol (ConsumerGroupHeartbeat v1, Kafka 4.0+).
func supportsNextGenGroups(cc ClientConfig) bool {
	cl, err := cc.newClient()
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return false
	}
	ok := len(vs) > 0
	vs.Each(func(v kadm.BrokerApiVersions) {
		if maxV, has := v.KeyMaxVersion(int16(kmsg.ConsumerGroupHeartbeat)); v.Err != nil || !has || maxV < 1 {
			ok = false
		}
	})
	return ok
}

// NewMembership joins cfg.Group.
func NewMembership(cfg MembershipConfig) (*Membership, error) {
	if err := cfg.Client.validate(); err != nil {
		return nil, fmt.Errorf("kafka membership: %w", err)
	}
	switch {
	case cfg.Group == "":
		return nil, errors.New("kafka membership: no group")
	case len(cfg.Topics) == 0:
		return nil, errors.New("kafka membership: no topics")
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Membership{cfg: cfg, owned: map[Partition]bool{}, away: map[Partition]bool{}}
	list := func(ps map[string][]int32) []Partition {
		var out []Partition
		for _, t := range slices.Sorted(maps.Keys(ps)) {
			for _, p := range slices.Sorted(slices.Values(ps[t])) {
				out = append(out, Partition{t, p})
			}
		}
		return out
	}
	// KIP-848 where the brokers have it (Kafka 4.0+): the coordinator
	// assigns, incrementally; otherwise the classic protocol with the
	// cooperative-sticky assignor.
	balance := []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
	if cfg.NextGen && supportsNextGenGroups(cfg.Client) {
		balance = []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}
		m.protocol = "consumer (KIP-848)"
	} else {
		m.protocol = "classic, cooperative-sticky"
	}
	if cfg.DiscoveryInterval == 0 {
		cfg.DiscoveryInterval = DefaultDiscoveryInterval
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		balance[0],
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, a map[string][]int32) {
			ps := list(a)
			m.mu.Lock()
			for _, p := range ps {
				m.owned[p] = true
				delete(m.away, p)
			}
			m.mu.Unlock()
			if len(ps) > 0 {
				m.cfg.Logger.Info("partitions assigned", "group", cfg.Group, "partitions", fmt.Sprint(ps))
				if cfg.OnAssigned != nil {
					cfg.OnAssigned(ctx, ps)
				}
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, r map[string][]int32) {
			m.forget(list(r))
			m.drop(ctx, list(r), "revoked", cfg.OnRevoked)
		}),
		kgo.OnPartitionsLost(func(ctx context.Context, _ *kgo.Client, l map[string][]int32) {
			m.forget(list(l))
			m.drop(ctx, list(l), "lost", cfg.OnLost)
		}),
	}
	opts = append(opts, balance[1:]...)
	if every := cfg.DiscoveryInterval; every > 0 {
		// The leader of a classic group sees added partitions only at a
		// metadata refresh: kgo's default age of 5 minutes left them
		// unassigned, and their records unread, that long
		// (docs/design.md, "The Kafka source").
		// kgo accepts ages from 10ms to an hour.
		every = min(max(every, 10*time.Millisecond), time.Hour)
		opts = append(opts, kgo.MetadataMaxAge(every), kgo.MetadataMinAge(min(every, 5*time.Second)))
	}
	if cfg.Instance != "" {
		opts = append(opts, kgo.ClientID(cfg.Instance))
	}
	if cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		// The group protocol's own steps, at debug level.
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(slogWriter{cfg.Logger}, kgo.LogLevelInfo, nil)))
	}
	cl, err := cfg.Client.newClient(opts...)
	if err != nil {
		return nil, err
	}
	// The member only holds partitions; the tasks read them.
	cl.PauseFetchTopics(cfg.Topics...)
	m.cl = cl
	// kgo manages the group while it is polled; with fetches paused a
	// poll returns nothing and only ends when the client closes.
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		var last string
		var logged time.Time
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			// Errors of the group session (a refused join, an
			// unreachable coordinator) come as fetch errors; kgo
			// retries them, and the log says what is wrong.
			fs.EachError(func(_ string, _ int32, err error) {
				if msg := err.Error(); msg != last || time.Since(logged) > time.Minute {
					last, logged = msg, time.Now()
					m.cfg.Logger.Warn("the group member cannot take part in its group (retrying)", "group", cfg.Group, "err", m.cfg.Client.explain(err))
				}
			})
		}
	}()
	go m.reconcileLoop()
	return m, nil
}

// reconcileLoop compares, every half session timeout, what the member
// holds with what the group says each member holds (see Reconcile).
func (m *Membership) reconcileLoop() {
	t := time.NewTicker(m.cfg.SessionTimeout / 2)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.SessionTimeout/2)
			if _, err := m.Reconcile(ctx); err != nil {
				m.cfg.Logger.Debug("could not compare the partitions held with the group's view", "group", m.cfg.Group, "err", err)
			}
			cancel()
		}
	}
}

// Reconcile asks the group coordinator who holds what. When the group is
// stable and gives a partition this member holds to another member (or
// no longer lists this member), the partition is lost: the member's own
// client missed that, and the work on it must stop (OnLost) before it
// fights its new owner. It returns the partitions it dropped. A
// partition dropped so that the group's view later lists under this
// member again is taken back (OnAssigned): the member's client never
// gave it up, so it would not assign it again, and no member would run
// it.
func (m *Membership) Reconcile(ctx context.Context) ([]Partition, error) {
	member, _ := m.cl.GroupMetadata()
	m.mu.Lock()
	idle := len(m.owned) == 0 && len(m.away) == 0
	m.mu.Unlock()
	if member == "" || idle {
		return nil, nil
	}
	view, err := describeGroup(ctx, m.cl, m.cfg.Group)
	if err != nil {
		return nil, err
	}
	if view.State != "Stable" {
		return nil, nil // a rebalance is on: the member will hear of it
	}
	m.mu.Lock()
	lost, back, gone := reconcile(member, m.owned, m.away, view)
	for _, p := range gone {
		delete(m.away, p)
	}
	m.mu.Unlock()
	if len(lost) > 0 || len(back) > 0 {
		if again, _ := m.cl.GroupMetadata(); again != member {
			return nil, nil // the member rejoined meanwhile
		}
	}
	if len(lost) > 0 {
		m.cfg.Logger.Warn("the group gives partitions this member holds to another member: they are lost", "group", m.cfg.Group, "member", member, "partitions", fmt.Sprint(lost))
		m.mu.Lock()
		for _, p := range lost {
			m.away[p] = true
		}
		m.mu.Unlock()
		m.drop(ctx, lost, "lost", m.cfg.OnLost)
	}
	if len(back) > 0 {
		// Seen in a chaos run: a partition dropped so was never run
		// again by anyone, the group listing it under this member.
		m.mu.Lock()
		for _, p := range back {
			delete(m.away, p)
			m.owned[p] = true
		}
		m.mu.Unlock()
		m.cfg.Logger.Warn("the group lists partitions this member dropped as lost under this member again: it takes them back", "group", m.cfg.Group, "member", member, "partitions", fmt.Sprint(back))
		if m.cfg.OnAssigned != nil {
			m.cfg.OnAssigned(ctx, back)
		}
	}
	return lost, nil
}

// reconcile compares what member holds (owned) and what Reconcile dropped
// before (away) with the group's stable view: lost are the partitions it
// holds that the group gives to another member (all of them when the
// group does not list the member), back the dropped ones the group lists
// under this member, gone the dropped ones another member holds now (the
// member's client assigns them again if they come back).
func reconcile(member string, owned, away map[Partition]bool, view GroupView) (lost, back, gone []Partition) {
	holder := map[Partition]string{}
	listed := false
	for _, mem := range view.Members {
		if mem.MemberID == member {
			listed = true
		}
		for _, p := range mem.Partitions {
			holder[p] = mem.MemberID
		}
	}
	for p := range owned {
		if h, ok := holder[p]; !listed || ok && h != member {
			lost = append(lost, p)
		}
	}
	for p := range away {
		switch h, ok := holder[p]; {
		case !listed:
		case h == member && !owned[p]:
			back = append(back, p)
		case ok && h != member:
			gone = append(gone, p)
		}
	}
	for _, ps := range [][]Partition{lost, back, gone} {
		slices.SortFunc(ps, func(a, b Partition) int {
			return compareSplits(split{a.Topic, a.Partition}, split{b.Topic, b.Partition})
		})
	}
	return lost, back, gone
}

// GroupView is a group's members and what each holds, as its coordinator
// sees them.
type GroupView struct {
	// Protocol is "consumer" (KIP-848) or "classic".
	Protocol string
	State    string
	Members  []GroupMember
}

// GroupMember is one member of a GroupView.
type GroupMember struct {
	MemberID, ClientID, Host string
	Partitions               []Partition
}

// DescribeGroup returns the members of group and their partitions,
// whichever protocol the group speaks (a scale-out job's instances are
// its members, named by their client ids).
func DescribeGroup(ctx context.Context, cc ClientConfig, group string) (GroupView, error) {
	cl, err := cc.newClient()
	if err != nil {
		return GroupView{}, err
	}
	defer cl.Close()
	v, err := describeGroup(ctx, cl, group)
	return v, cc.explain(err)
}

func describeGroup(ctx context.Context, cl *kgo.Client, group string) (GroupView, error) {
	adm := kadm.NewClient(cl)
	sort := func(ps []Partition) {
		slices.SortFunc(ps, func(a, b Partition) int {
			return compareSplits(split{a.Topic, a.Partition}, split{b.Topic, b.Partition})
		})
	}
	// KIP-848 groups first: the classic describe does not show them.
	// The answer names topics by id (newer versions), resolved here.
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	if resp, err := req.RequestWith(ctx, cl); err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && len(resp.Groups[0].Members) > 0 {
		g := resp.Groups[0]
		names := map[kadm.TopicID]string{}
		if tds, err := adm.ListTopics(ctx); err == nil {
			for _, td := range tds {
				names[td.ID] = td.Topic
			}
		}
		v := GroupView{Protocol: "consumer", State: g.State}
		for _, mem := range g.Members {
			gm := GroupMember{MemberID: mem.MemberID, ClientID: mem.ClientID, Host: mem.ClientHost}
			for _, tp := range mem.Assignment.TopicPartitions {
				name := tp.Topic
				if name == "" {
					name = names[kadm.TopicID(tp.TopicID)]
				}
				for _, p := range tp.Partitions {
					gm.Partitions = append(gm.Partitions, Partition{name, p})
				}
			}
			sort(gm.Partitions)
			v.Members = append(v.Members, gm)
		}
		return v, nil
	}
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return GroupView{}, fmt.Errorf("describe group %s: %w", group, err)
	}
	g, ok := gs[group]
	if !ok {
		return GroupView{Protocol: "classic", State: "Dead"}, nil
	}
	if g.Err != nil {
		return GroupView{}, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	v := GroupView{Protocol: "classic", State: g.State}
	for _, mem := range g.Members {
		gm := GroupMember{MemberID: mem.MemberID, ClientID: mem.ClientID, Host: mem.ClientHost}
		if c, ok := mem.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				for _, p := range t.Partitions {
					gm.Partitions = append(gm.Partitions, Partition{t.Topic, p})
				}
			}
		}
		sort(gm.Partitions)
		v.Members = append(v.Members, gm)
	}
	return v, nil
}

func (m *Membership) drop(ctx context.Context, ps []Partition, how string, fn func(context.Context, []Partition)) {
	m.mu.Lock()
	var mine []Partition
	for _, p := range ps {
		if m.owned[p] {
			mine = append(mine, p)
			delete(m.owned, p)
		}
	}
	m.mu.Unlock()
	if len(mine) == 0 {
		return
	}
	m.cfg.Logger.Info("partitions "+how, "group", m.cfg.Group, "partitions", fmt.Sprint(mine))
	if fn != nil {
		fn(ctx, mine)
	}
}

// forget clears ps from away: the member's client gave them up too, and
// assigns them again if the group gives them back.
func (m *Membership) forget(ps []Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		delete(m.away, p)
	}
}

// Owns reports whether the member holds p now.
func (m *Membership) Owns(p Partition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned[p]
}

// Owned returns the partitions the member holds, sorted.
func (m *Membership) Owned() []Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Collect(maps.Keys(m.owned))
	slices.SortFunc(out, func(a, b Partition) int {
		return compareSplits(split{a.Topic, a.Partition}, split{b.Topic, b.Partition})
	})
	return out
}

// Generation returns the group generation and this member's id, or -1
// before the member joined.
func (m *Membership) Generation() (int32, string) {
	member, gen := m.cl.GroupMetadata()
	return gen, member
}

// CommitOffsets commits offsets to the group as this member, with
// metadata on each: the member's id and generation (the member epoch
// under KIP-848), which a group with members requires of a plain offset
// commit. A member that left or was expelled commits nothing (the group
// answers UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or STALE_MEMBER_EPOCH),
// so a zombie's late commit does not land. A scale-out task whose commit
// point is a database commits its source's offsets so after each
// checkpoint (SourceConfig.GroupCommit), for monitoring and the
// repartition purge (docs/design.md, "Scale-out").
func (m *Membership) CommitOffsets(ctx context.Context, offsets map[Partition]int64, metadata string) error {
	member, gen := m.cl.GroupMetadata()
	if member == "" || gen < 0 {
		return fmt.Errorf("commit offsets to group %q: the instance's member has not joined the group (yet)", m.cfg.Group)
	}
	ps := slices.SortedFunc(maps.Keys(offsets), func(a, b Partition) int {
		return compareSplits(split{a.Topic, a.Partition}, split{b.Topic, b.Partition})
	})
	var topics []string
	for _, p := range ps {
		if len(topics) == 0 || topics[len(topics)-1] != p.Topic {
			topics = append(topics, p.Topic)
		}
	}
	ids, err := m.topicIDs(ctx, topics)
	if err != nil {
		return fmt.Errorf("commit offsets to group %q: %w", m.cfg.Group, err)
	}
	names := map[kadm.TopicID]string{}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = m.cfg.Group, gen, member
	for _, p := range ps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewOffsetCommitRequestTopic()
			// Newer versions name topics by id.
			t.Topic, t.TopicID = p.Topic, ids[p.Topic]
			names[ids[p.Topic]] = p.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, offsets[p], -1, kmsg.StringPtr(metadata)
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return fmt.Errorf("commit offsets to group %q as member %s (generation %d): %w", m.cfg.Group, member, gen, err)
	}
	var errs []error
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = names[kadm.TopicID(t.TopicID)]
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: %w", name, p.Partition, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, kerr.UnknownTopicID) {
			m.mu.Lock()
			m.ids = nil // a topic was recreated: look its id up again
			m.mu.Unlock()
		}
		return fmt.Errorf("commit offsets to group %q as member %s (generation %d): %w", m.cfg.Group, member, gen, err)
	}
	return nil
}

// topicIDs returns the ids of topics, from the member's cache or the
// brokers.
func (m *Membership) topicIDs(ctx context.Context, topics []string) (map[string]kadm.TopicID, error) {
	m.mu.Lock()
	out := map[string]kadm.TopicID{}
	var missing []string
	for _, t := range topics {
		if id, ok := m.ids[t]; ok {
			out[t] = id
		} else {
			missing = append(missing, t)
		}
	}
	m.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	tds, err := kadm.NewClient(m.cl).ListTopics(ctx, missing...)
	if err != nil {
		return nil, fmt.Errorf("topic ids: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil {
		m.ids = map[string]kadm.TopicID{}
	}
	for _, t := range missing {
		td, ok := tds[t]
		switch {
		case !ok:
			return nil, fmt.Errorf("topic %s: %w", t, kerr.UnknownTopicOrPartition)
		case td.Err != nil:
			return nil, fmt.Errorf("topic %s: %w", t, td.Err)
		}
		m.ids[t], out[t] = td.ID, td.ID
	}
	return out, nil
}

// Close leaves the group: the partitions still held are revoked first
// (OnRevoked), so the other members take them over without waiting for
// the session timeout.
func (m *Membership) Close() {
	m.cl.Close()
	<-m.done
}

// slogWriter writes kgo's log lines at debug level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("kafka group client", "line", strings.TrimSpace(string(p)))
	return len(p), nil
}
