package kafka

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/onceflow/onceflow/flow"
)

// SASL mechanisms [SASL].Mechanism accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASL holds SASL credentials. The zero value means no SASL.
type SASL struct {
	// Mechanism is one of PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, default ""
	// (no authentication).
	Mechanism string
	User      string
	Password  string
}

// ClientConfig is how the connector reaches the Kafka cluster.
type ClientConfig struct {
	// Brokers are the seed brokers, host:port; required.
	Brokers []string
	// ClientID is sent to the brokers to name this client in their logs and
	// quotas, default "onceflow".
	ClientID string
	// TLS enables TLS with this configuration, default nil (plaintext).
	TLS *tls.Config
	// SASL authenticates the connections, default none.
	SASL SASL
}

func (c ClientConfig) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("no Kafka brokers are configured: list at least one host:port in Brokers")
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return errors.New("a Kafka broker address is empty")
		}
	}
	switch c.SASL.Mechanism {
	case "":
		if c.SASL.User != "" || c.SASL.Password != "" {
			return errors.New("SASL user or password is set but no SASL mechanism: set Mechanism to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.User == "" {
			return fmt.Errorf("SASL mechanism %s needs a user", c.SASL.Mechanism)
		}
	default:
		return fmt.Errorf("SASL mechanism %q is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASL.Mechanism)
	}
	return nil
}

// opts returns the kgo options for c; c must be valid.
func (c ClientConfig) opts() []kgo.Opt {
	id := c.ClientID
	if id == "" {
		id = "onceflow"
	}
	// No KIP-714 client metrics push: onceflow reports its own metrics,
	// and kgo's Close gives a final push a second on a broker that does
	// not answer, which a stop cannot spare.
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID(id), kgo.DisableClientMetrics()}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS))
	}
	s := c.SASL
	switch s.Mechanism {
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.User, Pass: s.Password}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism()))
	}
	return opts
}

// NewClient returns a franz-go client connected the way the connector's
// are (brokers, TLS, SASL, client id), plus extra options: for tools that
// administer what a job uses (topics, groups). Close it when done.
func (c ClientConfig) NewClient(extra ...kgo.Opt) (*kgo.Client, error) { return c.newClient(extra...) }

// newClient creates a kgo client from c plus extra options.
func (c ClientConfig) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(c.opts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// explain adds to err what to check when the broker refused c's
// credentials: kgo's own error names only the Kafka error code, and a
// wrong password otherwise reads like any other broker failure.
func (c ClientConfig) explain(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) || errors.Is(err, kerr.IllegalSaslState) {
		// Restarting with the same credentials fails the same way.
		return flow.Unrecoverable(fmt.Errorf("authentication to Kafka failed for SASL %s user %q: check ClientConfig.SASL (kafka.sasl in a job file): its mechanism, user and password must match a user the brokers know: %w",
			c.SASL.Mechanism, c.SASL.User, err))
	}
	return err
}
