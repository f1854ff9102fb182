// Command pgonly is a PostgreSQL-only program: bq and its PostgreSQL
// driver, nothing else. TestPostgresOnlyLinksNoOtherDriver checks that it
// links no other driver.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/postgres"
)

func main() {
	client, err := bq.Open(context.Background(), os.Getenv("DATABASE_URL"), bq.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	fmt.Println("hello from bq")
}
