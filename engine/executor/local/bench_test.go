package local

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"niuma/engine/executor"
)

// BenchmarkAttemptTrue is what one local attempt of /bin/true costs, from
// Start to the end Wait reports (the shim, the log capper, the command and
// the files they write): the floor under a chain of such stages, whatever
// the engine does between them.
//
//	go test ./engine/executor/local -run '^$' -bench AttemptTrue -count 5
func BenchmarkAttemptTrue(b *testing.B) {
	run := b.TempDir()
	x := New()
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		stage := filepath.Join(run, fmt.Sprintf("s%d", i))
		job := executor.Job{RunID: "run-1", Stage: "s", Attempt: 1, Token: fmt.Sprintf("a%d", i), Argv: []string{"true"},
			RunDir: run, StageDir: stage, StdoutPath: filepath.Join(stage, "stdout.log"), StderrPath: filepath.Join(stage, "stderr.log")}
		h, err := x.Start(ctx, job)
		if err != nil {
			b.Fatal(err)
		}
		ex, err := h.Wait(ctx)
		if err != nil || !ex.Success() {
			b.Fatalf("exit %+v, %v", ex, err)
		}
	}
}
