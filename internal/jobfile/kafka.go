package jobfile

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// The decoder of the kafka section.

func (d *decoder) decodeKafka(path string, v *yaml.Node, k *KafkaConfig) {
	tlsEnabledSet := false
	d.mapping(path, v, map[string]field{
		"brokers":   d.strList(&k.Brokers),
		"client-id": d.str(&k.ClientID),
		"tls": func(p string, v *yaml.Node) {
			enabled := d.boolean(&k.TLS.Enabled)
			d.mapping(p, v, map[string]field{
				"enabled":              func(p string, v *yaml.Node) { tlsEnabledSet = true; enabled(p, v) },
				"ca-file":              d.str(&k.TLS.CAFile),
				"cert-file":            d.str(&k.TLS.CertFile),
				"key-file":             d.str(&k.TLS.KeyFile),
				"insecure-skip-verify": d.boolean(&k.TLS.InsecureSkipVerify),
			})
		},
		"sasl": func(p string, v *yaml.Node) {
			d.mapping(p, v, map[string]field{
				"mechanism": d.oneOf(&k.SASL.Mechanism, "plain", "scram-sha-256", "scram-sha-512"),
				"username":  d.secret(&k.SASL.Username),
				"password":  d.secret(&k.SASL.Password),
			})
		},
	})
	k.SASL.Mechanism = strings.ToUpper(k.SASL.Mechanism)
	t := &k.TLS
	named := t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
	if named && !tlsEnabledSet {
		t.Enabled = true
	}
	if named && tlsEnabledSet && !t.Enabled {
		d.errorf(d.at("kafka.tls.enabled"), "kafka.tls.enabled is false but other kafka.tls fields are set: remove them, or set enabled: true")
	}
}
