package bq

// The root package's tests open every database; users import only the
// drivers they use.
import (
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	_ "github.com/bqueue/bq/drivers/sqlite"
)
