package sqljob_test

import (
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/sqljob"
)

// Compile a script into a job; a mistake comes back at its line and
// column. Running it (job.Run(ctx)) needs the Kafka cluster the script
// names, so this example only compiles.
func ExampleCompile() {
	script := `
CREATE TABLE clicks (user_id BIGINT, url STRING)
WITH ('connector' = 'kafka', 'topic' = 'clicks', 'properties.bootstrap.servers' = 'localhost:9092');
CREATE TABLE clicks_per_user (user_id BIGINT, clicks BIGINT, PRIMARY KEY (user_id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'clicks-per-user', 'properties.bootstrap.servers' = 'localhost:9092');
INSERT INTO clicks_per_user SELECT user_id, COUNT(*) FROM clicks GROUP BY user_id;
`
	job, err := sqljob.Compile("clicks.sql", script)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("job:", job.Name())

	_, err = sqljob.Compile("clicks.sql", script+"INSERT INTO clicks_per_user SELECT userid, 1 FROM clicks;\n")
	var e *sqljob.Error
	if errors.As(err, &e) {
		fmt.Printf("line %d, column %d: %s\n", e.Line, e.Col, e.Msg)
	}
	// Output:
	// job: clicks
	// line 7, column 36: column userid is not a column of clicks (did you mean "user_id"?); it has user_id, url
}
