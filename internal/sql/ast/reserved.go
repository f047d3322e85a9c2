package ast

// Reserved are the words that cannot be an unquoted name in an
// expression, an alias or a table name (they would be ambiguous there).
// Other keywords (value, key, timestamp, date, year, …) can. The
// parser refuses them as names; the printer writes such a name quoted.
var Reserved = map[string]bool{
	"ALL": true, "AND": true, "AS": true, "BETWEEN": true, "BY": true,
	"CASE": true, "CAST": true, "CREATE": true, "CROSS": true,
	"CURRENT_DATE": true, "CURRENT_TIME": true, "CURRENT_TIMESTAMP": true,
	"DISTINCT": true, "ELSE": true, "END": true, "EXCEPT": true, "EXISTS": true,
	"FALSE": true, "FETCH": true, "FOR": true, "FROM": true, "FULL": true,
	"GROUP": true, "HAVING": true, "IN": true, "INNER": true, "INSERT": true,
	"INTERSECT": true, "INTERVAL": true, "IS": true, "JOIN": true,
	"LATERAL": true, "LEFT": true, "LIKE": true, "LIMIT": true,
	"LOCALTIME": true, "LOCALTIMESTAMP": true, "NATURAL": true, "NOT": true,
	"NULL": true, "OFFSET": true, "ON": true, "OR": true, "ORDER": true,
	"OUTER": true, "RIGHT": true, "SELECT": true, "SIMILAR": true,
	"TABLE": true, "THEN": true, "TRUE": true, "TRY_CAST": true, "UNION": true,
	"UNKNOWN": true, "USING": true, "WHEN": true, "WHERE": true,
	"WINDOW": true, "WITH": true, "ESCAPE": true, "VALUES": true,
}
