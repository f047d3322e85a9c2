package eval

import (
	"encoding/json"
	"testing"
)

// TestMatchAgreesWithRun: Match answers as Run does on the joined value
// {"left": l, "right": r}, or declines (ok false) where only the joined
// value tells (a side it reads that is not a JSON row; one it does not
// read is not looked at, as Run skips it).
func TestMatchAgreesWithRun(t *testing.T) {
	s := mustSchema(t, [2]string{"left", "ROW<num BIGINT, s VARCHAR>"}, [2]string{"right", "ROW<maxn BIGINT>"})
	joined := func(l, r string) []byte {
		side := func(v string) string { // as the join writes a side
			if v == "" {
				return "null"
			}
			if !ValidJSON([]byte(v)) {
				q, _ := json.Marshal(v)
				return string(q)
			}
			return v
		}
		return []byte(`{"left":` + side(l) + `,"right":` + side(r) + `}`)
	}
	for _, where := range []string{
		"`left`.num >= `right`.maxn",
		"`left`.num >= `right`.maxn AND CAST(`left`.s AS INT) > 0",
		"`right`.maxn IS NULL",
	} {
		sel := mustSelect(t, s, where, nil, [2]string{"m", "TRUE"})
		for _, c := range []struct {
			l, r    string
			decline bool
		}{
			{l: `{"num":5,"s":"1"}`, r: `{"maxn":3}`},
			{l: `{"num":2,"s":"1"}`, r: `{"maxn":3}`},
			{l: `{"num":3, "s":"7"}`, r: ` {"maxn":3} `},
			{l: `{"num":null,"s":"1"}`, r: `{"maxn":3}`},
			{l: `{"s":"1"}`, r: `{}`},
			{l: `{"num":4,"s":"x"}`, r: `{"maxn":3}`}, // the cast fails
			{l: `{"num":4,"s":"1"}`, r: ``},
			{l: ``, r: `{"maxn":1}`},
			{l: `null`, r: `null`},
			{l: `5`, r: `{"maxn":1}`, decline: true},
			{l: `{"num":"five"}`, r: `{"maxn":1}`, decline: true},
			{l: `{"num":4} x`, r: `{"maxn":1}`, decline: true},
			{l: `{"num":4`, r: `{"maxn":1}`, decline: true},
		} {
			keep, ok, err := sel.Match(&Ctx{}, []byte(c.l), []byte(c.r))
			if !ok {
				if !c.decline {
					t.Errorf("%s: Match(%s, %s) declined", where, c.l, c.r)
				}
				continue
			}
			res, runErr := sel.Run(&Ctx{}, joined(c.l, c.r), &Meta{}, nil)
			if keep != res.Keep || (err == nil) != (runErr == nil) || err != nil && err.Error() != runErr.Error() {
				t.Errorf("%s: Match(%s, %s) = %v, %v; Run on the joined value = %v, %v", where, c.l, c.r, keep, err, res.Keep, runErr)
			}
		}
	}
}
