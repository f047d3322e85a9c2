package jobfile

import (
	"go.yaml.in/yaml/v3"

	"github.com/onceflow/onceflow/internal/checkpoint"
	"github.com/onceflow/onceflow/internal/restart"
)

// The decoders of the sections that configure the engine: checkpointing
// and restart, which fill the configs of internal/checkpoint and
// internal/restart. Those packages validate them (Config.Validate);
// validate.go puts their problems on the lines of the keys.

func (d *decoder) decodeCheckpointing(path string, v *yaml.Node, c *checkpoint.Config) {
	var mode string
	d.mapping(path, v, map[string]field{
		"interval":           d.duration(&c.Interval),
		"mode":               d.oneOf(&mode, "exactly-once", "at-least-once"),
		"timeout":            d.duration(&c.Timeout),
		"min-pause":          d.duration(&c.MinPause),
		"max-concurrent":     d.integer(&c.MaxConcurrent),
		"tolerable-failures": d.integer(&c.TolerableFailures),
		"retained":           d.integer(&c.NumRetained),
	})
	if mode != "" {
		m, err := checkpoint.ParseMode(mode)
		if err != nil { // unreachable: oneOf checked the spelling
			d.errorf(d.at(path+".mode"), "%v", err)
		}
		c.Mode = m
	}
}

func (d *decoder) decodeRestart(path string, v *yaml.Node, r *restart.Config) {
	var strategy string
	var delaySet, jitterSet bool
	d.mapping(path, v, map[string]field{
		"strategy":                  d.str(&strategy),
		"attempts":                  d.integer(&r.Attempts),
		"delay":                     func(p string, v *yaml.Node) { delaySet = true; d.duration(&r.Delay)(p, v) },
		"max-failures-per-interval": d.integer(&r.MaxFailuresPerInterval),
		"failure-rate-interval":     d.duration(&r.FailureRateInterval),
		"initial-backoff":           d.duration(&r.InitialBackoff),
		"max-backoff":               d.duration(&r.MaxBackoff),
		"multiplier":                d.float(&r.Multiplier),
		"jitter":                    func(p string, v *yaml.Node) { jitterSet = true; d.float(&r.Jitter)(p, v) },
		"reset-threshold":           d.duration(&r.ResetThreshold),
		"attempts-before-reset":     d.integer(&r.AttemptsBeforeReset),
	})
	r.Strategy = restart.Kind(strategy)
	// In the file an explicit 0 means zero; in restart.Config zero means the
	// default, so say it with the flags.
	if delaySet && r.Delay == 0 {
		r.NoDelay = true
	}
	if jitterSet && r.Jitter == 0 {
		r.NoJitter = true
	}
}
