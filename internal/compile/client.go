package compile

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/onceflow/onceflow/connector/kafka"
	"github.com/onceflow/onceflow/internal/jobfile"
)

// ClientConfig translates the kafka section into the connector's client
// configuration: brokers, client id, SASL and TLS (its files read now).
func ClientConfig(k jobfile.KafkaConfig) (kafka.ClientConfig, error) {
	cc := kafka.ClientConfig{
		Brokers:  k.Brokers,
		ClientID: k.ClientID,
		SASL:     kafka.SASL{Mechanism: k.SASL.Mechanism, User: k.SASL.Username, Password: k.SASL.Password},
	}
	if k.TLS.Enabled {
		tc, err := tlsConfig(k.TLS)
		if err != nil {
			return cc, err
		}
		cc.TLS = tc
	}
	return cc, nil
}

func tlsConfig(t jobfile.TLSConfig) (*tls.Config, error) {
	// InsecureSkipVerify only when the file asks for it (test clusters).
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca-file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert-file/key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
