package mysql

import (
	"reflect"
	"testing"
)

// The id lists of MySQL statements: n placeholders, LIMIT n after an
// ordered change, and an empty list matching nothing rather than being
// invalid SQL.
func TestListBinding(t *testing.T) {
	d := newDialect("bq_", serverCaps{})
	q := "DELETE FROM t WHERE id IN " + list + " ORDER BY id" + byKey
	if got, want := d.List(q, 3), "DELETE FROM t WHERE id IN (?, ?, ?) ORDER BY id LIMIT 3"; got != want {
		t.Errorf("List(3) = %q, want %q", got, want)
	}
	if got, want := d.List("SELECT 1 WHERE x IN "+list, 0), "SELECT 1 WHERE x IN (?)"; got != want {
		t.Errorf("List(0) = %q, want %q", got, want)
	}
	if got := d.ListArgs(nil); !reflect.DeepEqual(got, []any{nil}) {
		t.Errorf("ListArgs(empty) = %v, want [<nil>]", got)
	}
	query, args := d.ListRows("INSERT INTO t VALUES ", []int64{7, 8}, "q", 1)
	if want := "INSERT INTO t VALUES (?, ?, ?), (?, ?, ?)"; query != want {
		t.Errorf("ListRows query = %q, want %q", query, want)
	}
	if want := []any{int64(7), "q", 1, int64(8), "q", 1}; !reflect.DeepEqual(args, want) {
		t.Errorf("ListRows args = %v, want %v", args, want)
	}
}
