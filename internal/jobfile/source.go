package jobfile

import (
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The decoder of the source section.

func (d *decoder) decodeSource(path string, v *yaml.Node, s *SourceConfig) {
	d.mapping(path, v, map[string]field{
		"topics":             d.strList(&s.Topics),
		"topic-regex":        d.str(&s.TopicRegex),
		"group":              d.str(&s.Group),
		"startup":            func(p string, v *yaml.Node) { d.decodeStartup(p, v, &s.Startup) },
		"discovery-interval": d.duration(&s.DiscoveryInterval),
		"isolation":          d.oneOf(&s.Isolation, IsolationReadCommitted, IsolationReadUncommitted),
		"bounded":            d.boolean(&s.Bounded),
		"parallelism":        d.integer(&s.Parallelism),
		"on-topic-recreated": d.oneOf(&s.OnTopicRecreated, RecreatedEarliest, RecreatedFail),
	})
	if s.DiscoveryInterval == 0 && d.at(path+".discovery-interval") != 0 {
		// Written as 0: discovery off, as a non-positive interval is in
		// Flink; the connector takes a negative interval for that.
		s.DiscoveryInterval = -1
	}
}

func (d *decoder) decodeStartup(path string, v *yaml.Node, st *Startup) {
	var mode string
	modeField := d.oneOf(&mode, startupModes...)
	if v.Kind == yaml.ScalarNode {
		modeField(path, v)
		st.Mode = StartupMode(mode)
		switch st.Mode {
		case StartTimestamp:
			d.errorf(v.Line, "%s timestamp needs the time to start from: write startup: {mode: timestamp, timestamp: 2024-05-01T00:00:00Z}", path)
		case StartSpecificOffsets:
			d.errorf(v.Line, "%s specific-offsets needs the offsets: write startup: {mode: specific-offsets, offsets: {TOPIC: {PARTITION: OFFSET}}}", path)
		}
		return
	}
	var ts string
	d.mapping(path, v, map[string]field{
		"mode":      modeField,
		"timestamp": d.str(&ts),
		"offsets":   func(p string, v *yaml.Node) { d.decodeOffsets(p, v, st) },
		"reset":     d.oneOf(&st.Reset, "earliest", "latest", "none"),
	})
	st.Mode = StartupMode(mode)
	if st.Mode == "" {
		if d.at(path+".mode") == 0 {
			d.errorf(v.Line, "%s.mode is missing: use one of %s", path, strings.Join(startupModes, ", "))
		}
		return
	}
	// Fields of other modes are almost always a mistake in the mode.
	if ts != "" && st.Mode != StartTimestamp {
		d.errorf(d.at(path+".timestamp"), "%s.timestamp only applies to mode timestamp, and the mode is %s", path, st.Mode)
	}
	if st.Offsets != nil && st.Mode != StartSpecificOffsets {
		d.errorf(d.at(path+".offsets"), "%s.offsets only applies to mode specific-offsets, and the mode is %s", path, st.Mode)
	}
	if st.Reset != "" && st.Mode != StartGroupOffsets && st.Mode != StartSpecificOffsets {
		d.errorf(d.at(path+".reset"), "%s.reset only applies to modes group-offsets and specific-offsets, and the mode is %s", path, st.Mode)
	}
	switch st.Mode {
	case StartTimestamp:
		if ts == "" {
			if d.at(path+".timestamp") == 0 {
				d.errorf(d.at(path+".mode"), "%s.timestamp is missing: mode timestamp needs the time to start from, such as 2024-05-01T00:00:00Z", path)
			}
			return
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			d.errorf(d.at(path+".timestamp"), "%s.timestamp %q is not an RFC 3339 time such as 2024-05-01T00:00:00Z or 2024-05-01T02:00:00+02:00", path, ts)
			return
		}
		st.Timestamp = t
	case StartSpecificOffsets:
		if len(st.Offsets) == 0 && d.at(path+".offsets") == 0 {
			d.errorf(d.at(path+".mode"), "%s.offsets is missing: mode specific-offsets needs {TOPIC: {PARTITION: OFFSET}}", path)
		}
	}
}

func (d *decoder) decodeOffsets(path string, v *yaml.Node, st *Startup) {
	v = resolve(v)
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must map topics to {PARTITION: OFFSET}, not %s", path, describe(v))
		return
	}
	st.Offsets = map[string]map[int32]int64{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		tk, tv := resolve(v.Content[i]), resolve(v.Content[i+1])
		topic := tk.Value
		if _, dup := st.Offsets[topic]; dup {
			d.errorf(tk.Line, "%s: topic %q is repeated", path, topic)
			continue
		}
		parts := map[int32]int64{}
		st.Offsets[topic] = parts
		if tv.Kind != yaml.MappingNode {
			d.errorf(tv.Line, "%s.%s must map partitions to offsets, such as {0: 42, 1: 17}, not %s", path, topic, describe(tv))
			continue
		}
		for j := 0; j+1 < len(tv.Content); j += 2 {
			pk, pv := resolve(tv.Content[j]), resolve(tv.Content[j+1])
			p, err := strconv.ParseInt(pk.Value, 10, 32)
			if err != nil || p < 0 {
				d.errorf(pk.Line, "%s.%s: partition %q is not a partition number (0 or more)", path, topic, pk.Value)
				continue
			}
			if _, dup := parts[int32(p)]; dup {
				d.errorf(pk.Line, "%s.%s: partition %d is repeated", path, topic, p)
				continue
			}
			o, err := strconv.ParseInt(pv.Value, 10, 64)
			if pv.Kind != yaml.ScalarNode || err != nil || o < 0 {
				d.errorf(pv.Line, "%s.%s.%d: offset %q is not an offset (0 or more)", path, topic, p, pv.Value)
				continue
			}
			parts[int32(p)] = o
		}
	}
}
