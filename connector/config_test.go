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
	_, err = optionsSide.DecodeStrings("sink.t", map[string]string{"n": "x", "waitt": "1s", "mode": "slow", "columns": "a", "max": "64MB"}, env)
	for _, want := range []string{
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
