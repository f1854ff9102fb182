package main

// The command works on every database bq supports.
import (
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	_ "github.com/bqueue/bq/drivers/sqlite"
)
