package pipeline

import (
	"testing"
)

// BenchmarkOperators measures the stateless expression operators on one
// JSON record, without the engine: ns and allocations per record.
func BenchmarkOperators(b *testing.B) {
	val := `{"user":"user-42","amount":129.50,"country":"DE","order":1234567,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`
	for _, tc := range []struct {
		name string
		cfg  func() (Operator, error)
	}{
		{"filter", FilterConfig{If: `value.amount >= 0 && value.country != "XX"`}.operator},
		{"map-set-remove", MapConfig{Set: map[string]string{"gross": "value.amount * 1.19"}, Remove: []string{"pad"}}.operator},
		{"map-value", MapConfig{Value: `{"u": value.user, "g": value.amount * 1.19}`}.operator},
		{"key-by", KeyByConfig{Key: "value.user"}.operator},
	} {
		b.Run(tc.name, func(b *testing.B) {
			op, err := tc.cfg()
			if err != nil {
				b.Fatal(err)
			}
			h := &handle[krec]{acc: &kAccess}
			b.ReportAllocs()
			for b.Loop() {
				h.rec = krec{Key: "k", Value: val}
				if op.Map != nil {
					err = op.Map(h)
				} else {
					err = op.Each(h, func() {})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
