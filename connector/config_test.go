package connector

import (
	"strings"
	"testing"
	"time"
)

var optionsSide = &Side{Section: "sink.t", Fields: []Field{
	{Name: "url", Required: true, Secret: true, Doc: "d", IfMissing: "name the server"},
	{Name: "n", Kind: IntValue, Default: "7", Doc: "d"},
	{Name: "on", Kind: BoolValue, Doc: "d"},
	{Name: "wait", Kind: DurationValue, Default: "10s", Doc: "d"},
	{Name: "max", Kind: SizeValue, Doc: "d"},
	{Name: "mode", Kind: EnumValue, Enum: []string{"fast", "read_committed"}, Doc: "d"},
	{Name: "keys", Kind: ListValue, Doc: "d"},
	{Name: "columns", Kind: ColumnsValue, Doc: "d"},
}}

// SQL's WITH options decode by the same field kinds as a job file's
// section: lists comma-separated, map entries as name.entry keys, secrets
// from the environment, defaults filled in.
func TestDecodeStrings(t *testing.T) {
	env := func(k string) (string, bool) { return map[string]string{"URL": "redis://h"}[k], k == "URL" }
	c, err := optionsSide.DecodeStrings("sink.t", map[string]string{
		"url": "${URL}", "on": "yes", "max": "64MiB", "mode": "READ-COMMITTED", "keys": "a, b",
		"columns.id": "key", "columns.n": " value.n ",
	}, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		got, want any
	}{
		{c.String("url"), "redis://h"}, {c.Int("n"), 7}, {c.Bool("on"), true}, {c.Duration("wait"), 10 * time.Second},
		{c.Size("max"), int64(64 << 20)}, {c.String("mode"), "read_committed"}, {strings.Join(c.List("keys"), "|"), "a|b"},
		{len(c.Map("columns")), 2}, {c.Has("n"), false}, {c.Has("on"), true},
	} {
		if tc.got != tc.want {
			t.Errorf("got %v, want %v", tc.got, tc.want)
		}
	}
	_, err = optionsSide.DecodeStrings("sink.t", map[string]string{"n": "x", "waitt": "1s", "mode": "slow", "columns": "a", "max": "64MB", "columnz.id": "key"}, env)
	for _, want := range []string{
		`sink.t: unknown option "columnz.id" (did you mean "columns"?)`,
		`sink.t.n: must be a whole number, not "x"`,
		`sink.t: unknown option "waitt" (did you mean "wait"?)`,
		`sink.t.mode: "slow" is not one of fast, read_committed`,
		`sink.t.columns is a map: write each entry as its own option, 'columns.<name>' = '<value>'`,
		`sink.t.max: "64MB" is ambiguous`,
		`sink.t.url is missing: name the server`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\ndoes not say %s", err, want)
		}
	}
	if _, err := optionsSide.DecodeStrings("sink.t", map[string]string{"url": "${NOPE}"}, env); err == nil || !strings.Contains(err.Error(), "NOPE, which is not set") {
		t.Errorf("unset variable: error %v", err)
	}
}

// A spec whose fields' kinds, enums, secrets and defaults do not fit
// together is refused at registration.
func TestSelfCheckFieldKinds(t *testing.T) {
	for _, f := range []Field{
		{Name: "a", Kind: EnumValue, Doc: "d"},
		{Name: "a", Enum: []string{"x"}, Doc: "d"},
		{Name: "a", Kind: IntValue, Secret: true, Doc: "d"},
		{Name: "a", Kind: IntValue, Default: "many", Doc: "d"},
		{Name: "a", Kind: ListValue, Default: "x", Doc: "d"},
		{Name: "a", Kind: EnumValue, Enum: []string{"X"}, Doc: "d"},
	} {
		side := &Side{Section: "sink.x", Fields: []Field{f}}
		if err := side.selfCheck(); err == nil {
			t.Errorf("%+v: accepted", f)
		}
	}
}

var flinkSide = &Side{Section: "source", Fields: []Field{
	{Name: "topics", Kind: ListValue, SQL: []string{"topic"}, Doc: "d"},
	{Name: "startup", Kind: GroupValue, Doc: "d", Fields: []Field{
		{Name: "mode", Kind: EnumValue, Enum: []string{"earliest", "latest"}, Aliases: map[string]string{"earliest-offset": "earliest"},
			Default: "earliest", SQL: []string{"scan.startup.mode"}, Doc: "d"},
		{Name: "offsets", Kind: MapsValue, Doc: "d"},
	}},
	{Name: "servers", Kind: ListValue, SQLOnly: true, SQL: []string{"properties.bootstrap.servers"}, Doc: "d"},
	{Name: "group", DefaultText: "onceflow-<job>", SQL: []string{"properties.group.id"}, Doc: "d"},
}}

// A field is named in SQL options by its name or its SQL names (Flink's),
// a group's field by <group>.<field> or its SQL names, the group itself
// by its first field; lists take ';' too, and enum aliases their value.
func TestDecodeStringsSQLNames(t *testing.T) {
	if err := flinkSide.selfCheck(); err != nil {
		t.Fatal(err)
	}
	c, err := flinkSide.DecodeStrings("source", map[string]string{
		"topic": "a; b", "scan.startup.mode": "EARLIEST_OFFSET", "properties.bootstrap.servers": "k:9092",
		"startup.offsets.orders.v1.0": "42", "startup.offsets.orders.v1.1": "7",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	offs := c.Map("startup.offsets")
	for _, tc := range []struct{ got, want any }{
		{strings.Join(c.List("topics"), "|"), "a|b"}, {c.String("startup.mode"), "earliest"}, {c.Has("startup.mode"), true},
		{c.Has("startup"), true}, {c.Bool("startup"), false}, {strings.Join(c.List("servers"), "|"), "k:9092"},
		{len(offs), 1}, {offs[0].Name, "orders.v1"}, {len(offs[0].Entries), 2}, {offs[0].Entries[1].Value, "7"},
		{c.Has("group"), false}, {c.String("group"), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("got %v, want %v", tc.got, tc.want)
		}
	}
	c, err = flinkSide.DecodeStrings("source", map[string]string{"startup": "latest"}, nil)
	if err != nil || c.String("startup.mode") != "latest" || !c.Bool("startup") {
		t.Errorf("the group's own name: mode %q, shorthand %v, error %v; want latest, true", c.String("startup.mode"), c.Bool("startup"), err)
	}
	c, _ = flinkSide.DecodeStrings("source", nil, nil)
	if c.String("startup.mode") != "earliest" || c.Has("startup.mode") {
		t.Errorf("a group's field's default: %q (written %v), want earliest, unwritten", c.String("startup.mode"), c.Has("startup.mode"))
	}
	_, err = flinkSide.DecodeStrings("source", map[string]string{
		"topic": "a", "topics": "b", "scan.startup.mod": "x", "startup.offsets.a": "1", "topic.x": "y",
	}, nil)
	for _, want := range []string{
		`source: options "topic" and "topics" both give topics: keep one`,
		`source: unknown option "scan.startup.mod" (did you mean "scan.startup.mode"?)`,
		`source: option "startup.offsets.a": write each entry as 'startup.offsets.<name>.<inner name>' = '<value>'`,
		`source: unknown option "topic.x" (did you mean "topic"?)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\ndoes not say %s", err, want)
		}
	}
}

// LineAt finds fields, group fields and the entries of map and maps
// fields.
func TestConfigLineAt(t *testing.T) {
	c := NewConfig("source", 3)
	c.Put("startup.mode", "latest", 5, true)
	c.Put("startup.offsets", []Entry{{Name: "orders.v1", Line: 6, Entries: []Entry{{Name: "0", Value: "1", Line: 7}}}}, 6, true)
	c.Put("columns", []Entry{{Name: "n", Line: 9}}, 8, true)
	for at, want := range map[string]int{
		"startup.mode": 5, "startup.offsets": 6, "startup.offsets.orders.v1": 6, "startup.offsets.orders.v1.0": 7,
		"startup.offsets.orders.v1.1": 0, "columns.n": 9, "columns.m": 0, "nothing": 0,
	} {
		if got := c.LineAt(at); got != want {
			t.Errorf("LineAt(%q) = %d, want %d", at, got, want)
		}
	}
}

// The fields SQL names, groups, aliases and default texts are checked at
// registration.
func TestSelfCheckSQLNamesAndGroups(t *testing.T) {
	for name, fields := range map[string][]Field{
		"SQL name taken twice": {{Name: "a", SQL: []string{"x"}, Doc: "d"}, {Name: "b", SQL: []string{"x"}, Doc: "d"}},
		"SQL name is a field":  {{Name: "a", SQL: []string{"b"}, Doc: "d"}, {Name: "b", Doc: "d"}},
		"group without fields": {{Name: "g", Kind: GroupValue, Doc: "d"}},
		"group in a group":     {{Name: "g", Kind: GroupValue, Doc: "d", Fields: []Field{{Name: "h", Kind: GroupValue, Doc: "d", Fields: []Field{{Name: "i", Doc: "d"}}}}}},
		"required in a group":  {{Name: "g", Kind: GroupValue, Doc: "d", Fields: []Field{{Name: "h", Required: true, Doc: "d"}}}},
		"fields of a text":     {{Name: "a", Doc: "d", Fields: []Field{{Name: "h", Doc: "d"}}}},
		"alias of no value":    {{Name: "a", Kind: EnumValue, Enum: []string{"x"}, Aliases: map[string]string{"y": "z"}, Doc: "d"}},
		"alias of a text":      {{Name: "a", Aliases: map[string]string{"y": "z"}, Doc: "d"}},
		"two defaults":         {{Name: "a", Default: "x", DefaultText: "y", Doc: "d"}},
		"dotted name":          {{Name: "a.b", Doc: "d"}},
	} {
		if err := (&Side{Section: "s", Fields: fields}).selfCheck(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
