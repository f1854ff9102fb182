package mysql

import "github.com/bqueue/bq/internal/driver"

// Importing the package lets bq.Open take mysql:// DSNs, as importing a
// database/sql driver registers it.
func init() { driver.Register(driver.Opens(Open), "mysql") }
