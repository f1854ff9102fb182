package driver

// BeforeCommit, when set (tests only), is called by every driver just
// before it commits a transaction bq owns.
// The conformance suite uses it to freeze a process inside a transaction,
// holding its locks. Set it before any transaction starts; it is read
// without synchronisation.
var BeforeCommit func()

// CallBeforeCommit calls BeforeCommit if it is set.
func CallBeforeCommit() {
	if BeforeCommit != nil {
		BeforeCommit()
	}
}
