package broker

import (
	"github.com/onceflow/onceflow/internal/dirlock"

	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Defaults of [Config]; each field's doc names the one it uses.
const (
	DefaultAddr          = "127.0.0.1:9092"
	DefaultPartitions    = 1
	DefaultTxnMaxTimeout = 15 * time.Minute // Kafka's transaction.max.timeout.ms
)

// Config configures [Start]. The zero value is a usable in-memory broker on
// [DefaultAddr].
type Config struct {
	// Addr is the host:port to listen on, default "127.0.0.1:9092". Port 0
	// picks a free port; [Broker.Addr] tells which. An empty host means
	// 127.0.0.1, not "every interface" as it does for net.Listen: the broker
	// has no authentication, so exposing it beyond this machine must be
	// spelled out ("0.0.0.0:9092"), and Start logs a warning when it is.
	Addr string

	// AdvertisedAddr is the host:port the broker tells clients to connect
	// to (Kafka's advertised.listeners), default: the bound address. Kafka
	// clients bootstrap on Addr but then reconnect to the advertised
	// address, so a broker bound to 0.0.0.0 for other machines needs this
	// set to a name those machines resolve. A missing or 0 port means the
	// bound port.
	AdvertisedAddr string

	// DataDir is the directory the broker keeps its log, group offsets and
	// transaction state in, default "" (in memory only: everything is gone
	// after Close). Its content survives Close and process crashes; see
	// fact 4 in the package doc. It must be new, empty, or written by this
	// broker before; it is created if needed and locked while the broker
	// runs, so two brokers never write the same directory.
	DataDir string

	// SyncWrites fsyncs every produced batch and every offset and
	// transaction state entry before the broker answers, default false.
	// Without it writes go straight to the operating system (no buffering
	// in the process), so a killed broker process (SIGKILL, panic, OOM)
	// loses nothing it acknowledged; only an operating system crash or
	// power loss can lose the last writes, as with Kafka's default
	// log.flush settings. SyncWrites closes that gap at the cost of one
	// disk sync per write, which bounds throughput by the disk's sync
	// latency. Ignored without DataDir.
	SyncWrites bool

	// Partitions is the partition count of topics created on first use
	// (auto-created by a produce or metadata request), default 1.
	Partitions int

	// Topics are created at start if they do not exist yet, name to
	// partition count, default none. A count below 1 means Partitions. A
	// topic that already exists in DataDir is left as it is, even if its
	// partition count differs (Start logs a warning): changing it would
	// move keys between partitions.
	Topics map[string]int32

	// Logger receives the broker's warnings and errors, default nil
	// (discard). The broker's info and debug output is per request and is
	// never forwarded.
	Logger *slog.Logger

	// TxnMaxTimeout is the longest transaction timeout a producer may ask
	// for (Kafka's transaction.max.timeout.ms), default 15 minutes. A
	// producer whose kgo.TransactionTimeout is longer fails to initialize
	// with kerr.InvalidTransactionTimeout.
	TxnMaxTimeout time.Duration

	// GroupSessionTimeout is how long a member of a KIP-848 consumer group
	// may stay silent before the coordinator moves its partitions (Kafka's
	// group.consumer.session.timeout.ms), default 45s as in Kafka; its
	// heartbeats are asked for at a tenth of it. Classic groups' members
	// choose their own, within 6s..30min.
	GroupSessionTimeout time.Duration
}

// withDefaults returns cfg with every zero field replaced by its default.
func (cfg Config) withDefaults() Config {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.TxnMaxTimeout == 0 {
		cfg.TxnMaxTimeout = DefaultTxnMaxTimeout
	}
	if cfg.GroupSessionTimeout == 0 {
		cfg.GroupSessionTimeout = 45 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// validate reports, in a sentence a user can act on, the first field of a
// defaulted cfg that cannot work.
func (cfg Config) validate() error {
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("broker address %q is not host:port (for example 127.0.0.1:9092): %w", cfg.Addr, err)
	}
	if _, err := parsePort(port); err != nil {
		return fmt.Errorf("broker address %q: %w", cfg.Addr, err)
	}
	if cfg.AdvertisedAddr != "" {
		if _, _, err := splitAdvertised(cfg.AdvertisedAddr); err != nil {
			return err
		}
	}
	checks := []struct {
		bad bool
		msg string
	}{
		{cfg.Partitions < 0, fmt.Sprintf("default partition count %d is negative; use 1 or more", cfg.Partitions)},
		{cfg.Partitions > math.MaxInt32, fmt.Sprintf("default partition count %d is too large", cfg.Partitions)},
		{cfg.TxnMaxTimeout < 0, fmt.Sprintf("transaction max timeout %v is negative", cfg.TxnMaxTimeout)},
		{cfg.TxnMaxTimeout > 0 && cfg.TxnMaxTimeout < time.Millisecond, fmt.Sprintf("transaction max timeout %v is below the broker's 1ms resolution", cfg.TxnMaxTimeout)},
		{cfg.TxnMaxTimeout > math.MaxInt32*time.Millisecond, fmt.Sprintf("transaction max timeout %v is above Kafka's limit of %v", cfg.TxnMaxTimeout, math.MaxInt32*time.Millisecond)},
	}
	for _, c := range checks {
		if c.bad {
			return errors.New(c.msg)
		}
	}
	for name := range cfg.Topics {
		if err := validTopicName(name); err != nil {
			return err
		}
	}
	return nil
}

// validTopicName applies Kafka's topic name rules, so a typo in a topic list
// fails at start rather than as an opaque broker error later.
func validTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > 249:
		return fmt.Errorf("topic name %q is longer than Kafka's 249 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q has %q; Kafka allows only letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 0 to 65535", s)
	}
	return p, nil
}

// splitAdvertised parses "host" or "host:port"; port 0 means the bound port.
func splitAdvertised(addr string) (host string, port int, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		// A bare host (no colon, or a bracket-less IPv6 address) is allowed.
		if ip := net.ParseIP(addr); ip != nil || !strings.Contains(addr, ":") {
			return addr, 0, nil
		}
		return "", 0, fmt.Errorf("advertised address %q is not host or host:port: %w", addr, err)
	}
	if h == "" {
		return "", 0, fmt.Errorf("advertised address %q has no host; clients need a name or IP to connect to", addr)
	}
	port, err = parsePort(p)
	if err != nil {
		return "", 0, fmt.Errorf("advertised address %q: %w", addr, err)
	}
	return h, port, nil
}

// Broker is a running single-node Kafka-compatible broker (kfake underneath).
// Its methods are safe for concurrent use.
type Broker struct {
	cluster *kfake.Cluster
	addr    string      // bound host:port
	dataDir string      // "" when in memory
	logs    *slogBridge // counts errors, so Close can tell a clean stop
	unlock  func()      // releases the DataDir lock; nil without DataDir

	closeOnce sync.Once
	closeErr  error
}

// Start listens on cfg.Addr and starts serving the Kafka protocol. Addresses
// already in use fail with an error matching [ErrAddrInUse], a DataDir
// another broker holds with [ErrDataDirInUse]. After an unclean stop (a
// crash, or a Close that could not save), Start repairs the data dir before
// it lets clients in; see the package doc.
func Start(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}

	var (
		unlock  func()
		unclean bool
	)
	if cfg.DataDir != "" {
		var err error
		if unlock, unclean, err = prepareDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	ok := false
	defer func() {
		if !ok && unlock != nil {
			unlock()
		}
	}()

	raw, err := listen(cfg.Addr)
	if err != nil {
		return nil, err
	}
	adv, err := advertised(raw, cfg.AdvertisedAddr)
	if err != nil {
		raw.Close()
		return nil, err
	}
	// kfake always asks for 127.0.0.1:<port>; handing it our own listener
	// lets us bind any host, report a clear "in use" error before kfake
	// starts, advertise another address, and hold clients back until the
	// data dir is repaired.
	ln := newGatedListener(raw, adv)
	if !isLoopback(raw.Addr()) {
		cfg.Logger.Warn("broker listens beyond this machine and has no authentication: anyone who can reach it can read and write every topic",
			"addr", raw.Addr().String())
	}

	logs := &slogBridge{l: cfg.Logger}
	handed := false
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(string, string) (net.Listener, error) {
			if handed { // kfake only asks again for AddNode
				return nil, errors.New("broker: a single-node broker cannot add nodes")
			}
			handed = true
			return ln, nil
		}),
		kfake.WithLogger(logs),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.ClusterID("onceflow"),
		// Passed on every start: kfake keeps broker configs in DataDir,
		// and options win over the stored value, so a changed
		// TxnMaxTimeout takes effect on restart.
		kfake.BrokerConfigs(map[string]string{
			"transaction.max.timeout.ms":           strconv.FormatInt(cfg.TxnMaxTimeout.Milliseconds(), 10),
			"group.consumer.session.timeout.ms":    strconv.FormatInt(cfg.GroupSessionTimeout.Milliseconds(), 10),
			"group.consumer.heartbeat.interval.ms": strconv.FormatInt(max(cfg.GroupSessionTimeout.Milliseconds()/10, 100), 10),
		}),
	}
	if cfg.DataDir != "" {
		// See pruneExpiredMembers: kfake would keep their partitions
		// owned for good.
		n, err := pruneExpiredMembers(cfg.DataDir, cfg.GroupSessionTimeout, time.Now())
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("broker: data dir %s: dropping the group members whose session ran out: %w", cfg.DataDir, err)
		}
		if n > 0 {
			cfg.Logger.Info("dropped group members whose session ran out while the broker was down; they join again", "members", n)
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		ln.Close()
		if cfg.DataDir != "" {
			return nil, fmt.Errorf("broker: data dir %s holds state the broker cannot load (damaged, or written by an incompatible version): %w", cfg.DataDir, err)
		}
		return nil, fmt.Errorf("broker: starting: %w", err)
	}

	b := &Broker{cluster: c, addr: raw.Addr().String(), dataDir: cfg.DataDir, logs: logs, unlock: unlock}
	ok = true // b owns the lock now: setUp failures and b.Close release it
	if err := b.setUp(cfg, ln, unclean); err != nil {
		b.cluster.Close()
		if b.unlock != nil {
			b.unlock()
		}
		return nil, err
	}
	ln.open()
	return b, nil
}

// setUp readies a started cluster before clients are let in.
func (b *Broker) setUp(cfg Config, ln *gatedListener, unclean bool) error {
	if cfg.DataDir != "" {
		// From here on clients may write, so a crash must find no mark.
		if err := os.Remove(filepath.Join(cfg.DataDir, cleanStopFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker: data dir %s is not writable: %w", cfg.DataDir, err)
		}
		if err := removeSnapshots(cfg.DataDir); err != nil {
			return fmt.Errorf("broker: data dir %s: removing loaded snapshots: %w", cfg.DataDir, err)
		}
	}
	if unclean {
		cfg.Logger.Warn("the broker did not stop cleanly last time; checking every partition for transactions left open", "data_dir", cfg.DataDir)
		if err := repairAbortMarkers(ln, cfg.Logger); err != nil {
			return fmt.Errorf("broker: data dir %s: repairing after an unclean stop: %w", cfg.DataDir, err)
		}
	}
	return b.createTopics(cfg)
}

// createTopics creates the configured topics that do not exist yet. Topics
// are created after start rather than seeded because kfake seeds only an
// empty DataDir, and a topic added to the config later must still appear.
func (b *Broker) createTopics(cfg Config) error {
	for name, n := range cfg.Topics {
		if n < 1 {
			n = int32(cfg.Partitions)
		}
		err := b.cluster.CreateTopic(name, n, nil)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			if have := len(b.cluster.PartitionInfos(name)); have != int(n) {
				cfg.Logger.Warn("topic exists with a different partition count than configured; keeping it",
					"topic", name, "partitions", have, "configured", n)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("broker: creating topic %s: %w", name, err)
		}
	}
	return nil
}

// Addr returns the host:port the broker is bound to, with the real port when
// Config.Addr asked for port 0. Clients bootstrap from it.
func (b *Broker) Addr() string { return b.addr }

// Cluster returns the underlying kfake cluster, for tests that inject
// failures with Cluster().Fault or Cluster().ControlKey (see the package
// doc), or inspect partitions with PartitionInfo.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the broker and, with a DataDir, saves its state so the next
// Start resumes it without repair. Open transactions are kept, not aborted
// (see the package doc). Close returns an error if saving failed (the
// details went to Config.Logger); the next Start then repairs the data dir
// as after a crash. Close is idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		before := b.logs.errors.Load()
		b.cluster.Close()
		if b.dataDir != "" {
			if b.logs.errors.Load() != before {
				b.closeErr = fmt.Errorf("broker: saving state to %s failed (see the log); the next start repairs it", b.dataDir)
			} else if err := os.WriteFile(filepath.Join(b.dataDir, cleanStopFile), nil, 0o644); err != nil {
				b.closeErr = fmt.Errorf("broker: marking %s as cleanly stopped: %w; the next start repairs it", b.dataDir, err)
			}
		}
		if b.unlock != nil {
			b.unlock()
		}
	})
	return b.closeErr
}

// listen binds addr, reading an empty host as loopback.
func listen(addr string) (net.Listener, error) {
	host, port, _ := net.SplitHostPort(addr) // validated
	if host == "" {
		host = "127.0.0.1"
	}
	addr = net.JoinHostPort(host, port)
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("broker: %s is already in use: another broker running? pass --addr %s to pick a free port, or stop the other process: %w",
			addr, net.JoinHostPort(host, "0"), errors.Join(ErrAddrInUse, err))
	}
	return nil, fmt.Errorf("broker: listening on %s: %w", addr, err)
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// hostPortAddr is an advertised address. kfake puts a listener's Addr into
// metadata and coordinator answers, which is how a client learns where to
// reconnect.
type hostPortAddr string

func (hostPortAddr) Network() string  { return "tcp" }
func (a hostPortAddr) String() string { return string(a) }

// advertised returns the address to advertise for ln, nil for its own.
func advertised(ln net.Listener, adv string) (net.Addr, error) {
	if adv == "" {
		return nil, nil
	}
	host, port, err := splitAdvertised(adv)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if port == 0 {
		port = ln.Addr().(*net.TCPAddr).Port
	}
	return hostPortAddr(net.JoinHostPort(host, strconv.Itoa(port))), nil
}

// prepareDataDir creates dir if needed and locks it for this process. It
// reports whether the directory holds state from a broker that did not stop
// cleanly. The returned func releases the lock.
func prepareDataDir(dir string) (unlock func(), unclean bool, err error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, false, fmt.Errorf("broker: data dir %s is a file, not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("broker: creating data dir: %w", err)
	}
	unlock, err = dirlock.Lock(filepath.Join(dir, lockFileName))
	if err != nil {
		if errors.Is(err, dirlock.ErrLocked) {
			return nil, false, fmt.Errorf("broker: data dir %s: %w: %w; stop it or choose another data dir", dir, ErrDataDirInUse, err)
		}
		return nil, false, fmt.Errorf("broker: data dir %s is not writable: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		unlock()
		return nil, false, fmt.Errorf("broker: reading data dir: %w", err)
	}
	var hasState, hasOther bool
	for _, e := range ents {
		switch e.Name() {
		case "meta.json": // kfake writes it first, on the first start
			hasState = true
		case lockFileName, cleanStopFile:
		default:
			hasOther = true
		}
	}
	if hasOther && !hasState {
		unlock()
		return nil, false, fmt.Errorf("broker: data dir %s holds files but no broker state; use an empty or new directory, so the broker never writes among unrelated files", dir)
	}
	_, err = os.Stat(filepath.Join(dir, cleanStopFile))
	return unlock, hasState && err != nil, nil
}

// lockFileName is the file in DataDir that holds the lock and the pid of the
// broker holding it. kfake ignores files it does not know.
const lockFileName = "onceflow-broker.lock"
