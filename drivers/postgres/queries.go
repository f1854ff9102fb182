package postgres

import (
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// queries holds every statement with the table prefix spliced in once.
type queries struct {
	// SharedQueries are those of sqlexec.Shared (shared.go).
	sqlexec.SharedQueries

	jobQueries       // jobs.go
	claimQueries     // claims.go
	semaphoreQueries // semaphores.go
	lineQueries      // multikey.go
	admitQueries     // admit.go
	processQueries   // processes.go
	policyQueries    // policies.go
	cancelQueries    // cancel.go

	history historyQueries // history.go
	unique  uniqueQueries  // unique.go
	rate    rateQueries    // rate.go

	// spell splices the prefix into statements built at run time (list.go).
	spell func(string) string
}

const jobColumns = sqltext.JobColumns

func newQueries(prefix string) *queries {
	p := sqltext.Spelling(prefix)
	return &queries{
		SharedQueries:    newSharedQueries(p),
		jobQueries:       newJobQueries(p),
		claimQueries:     newClaimQueries(p),
		semaphoreQueries: newSemaphoreQueries(p),
		lineQueries:      newLineQueries(p),
		admitQueries:     newAdmitQueries(p),
		processQueries:   newProcessQueries(p),
		policyQueries:    newPolicyQueries(p),
		cancelQueries:    newCancelQueries(p),
		spell:            p,
		history:          newHistoryQueries(p),
		unique:           newUniqueQueries(prefix),
		rate:             newRateQueries(p),
	}
}
