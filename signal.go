package bq

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext returns a context that the first SIGINT or SIGTERM
// cancels, so Run stops gracefully: no new claims, running jobs get
// Config.ShutdownTimeout to finish. A second signal exits the process at
// once with status 1; its claims are reaped by a dispatcher once the
// process is declared dead (Config.ProcessDeadAfter).
//
//	ctx, stop := bq.SignalContext(context.Background())
//	defer stop()
//	err := client.Run(ctx)
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "bq: %s received; stopping gracefully (send it again to stop at once)\n", sig)
			cancel()
		case <-ctx.Done():
			signal.Stop(sigs)
			return
		}
		if sig, ok := <-sigs; ok {
			fmt.Fprintf(os.Stderr, "bq: second %s; exiting now, running jobs will be reaped\n", sig)
			os.Exit(1)
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}
