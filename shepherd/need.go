package shepherd

import (
	"time"

	"niuma/shepherd/predict"
)

// Need is what one stage asks of the machine, as the engine reads it from a
// run and its stage and as the simulator reads it from a trace job. Build
// turns it into the Request a pass decides over; both go through Build, so
// a replayed job and a live run with the same needs make the same request.
type Need struct {
	ID        string // the stage's key: "RUN/STAGE" (live), the job's ID (replay)
	GPUs      int
	GPUMemMiB int64 // per GPU; 0 = unspecified
	CPUMilli  int64 // thousandths of a CPU; 0 = unspecified
	MemMiB    int64 // host memory; 0 = unspecified
	Priority  int
	Spot      bool // may be preempted (SIGTERM, requeued, resumed from its checkpoint)
	Share     bool // may share a GPU when memory fits
	// ReadySince is when the stage became ready: its needs succeeded, its
	// backoff ended, or it was preempted. Aging counts from here.
	ReadySince time.Time
	// Attained is how long its earlier attempts ran (after a preemption).
	Attained time.Duration
	// Estimate is the user's estimate of the whole stage's run time; it
	// overrides Predicted. 0 = none.
	Estimate time.Duration
	// Predicted is the predictor's answer for the stage; zero = unknown.
	Predicted predict.Estimate
}

// Build turns a Need into a Request, the one rule for both engine and
// simulator:
//   - the user's estimate, when given, is both the estimate and the bound
//     the run is expected to end within; otherwise the predictor's median
//     and its 90th percentile; otherwise unknown;
//   - what earlier attempts ran is taken off both (a preempted run resumes
//     from its checkpoint); a run that already ran past its estimate is
//     expected to run as long again as it has (long runs tend to run on),
//     with no bound.
func Build(n Need) Request {
	r := Request{ID: n.ID, GPUs: max(n.GPUs, 0), MemPerGPUMiB: max(n.GPUMemMiB, 0), CPUMilli: max(n.CPUMilli, 0),
		MemMiB: max(n.MemMiB, 0), Priority: n.Priority, Submit: n.ReadySince, Preemptible: n.Spot,
		Shareable: n.Share, Attained: max(n.Attained, 0)}
	est, high := n.Estimate, n.Estimate
	if est <= 0 && n.Predicted.Known() {
		est, high = n.Predicted.Median, max(n.Predicted.High, n.Predicted.Median)
	}
	if est <= 0 {
		return r
	}
	if est > r.Attained {
		r.Estimate = est - r.Attained
	} else {
		r.Estimate = max(r.Attained, time.Second)
	}
	if high > r.Attained {
		r.EstimateHigh = high - r.Attained
	}
	return r
}
