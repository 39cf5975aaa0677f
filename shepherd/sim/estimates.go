package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"niuma/shepherd"
	"niuma/shepherd/predict"
)

// Estimates is how a replay learns how long jobs will run: the regime
// under which a policy is measured.
//   - none: no estimate at all (a fresh install, nothing in the archive);
//   - predicted: the runtime predictor, fed with the trace's earlier
//     completions of similar jobs — the same user, GPU count and class
//     where the trace has users, otherwise the same GPU count — as the
//     engine feeds it from the archive;
//   - noisy:σ: a user's own estimate, the true duration × e^(σ·N(0,1)),
//     with the N(0,1) draw fixed per job by the seed (Job.Noise).
type Estimates struct {
	Mode  string // "none", "predicted" or "noisy"
	Sigma float64
}

// Estimate regimes by name.
var (
	NoEstimates = Estimates{Mode: "none"}
	Predicted   = Estimates{Mode: "predicted"}
)

// Noisy is the regime of users' estimates off by e^(σ·N(0,1)).
func Noisy(sigma float64) Estimates { return Estimates{Mode: "noisy", Sigma: sigma} }

// String is the regime as --estimates takes it.
func (e Estimates) String() string {
	if e.Mode == "noisy" {
		return "noisy:" + strconv.FormatFloat(e.Sigma, 'g', -1, 64)
	}
	if e.Mode == "" {
		return "none"
	}
	return e.Mode
}

// ParseEstimates reads "none", "predicted" or "noisy:σ" (σ ≥ 0, e.g. noisy:0.5).
func ParseEstimates(s string) (Estimates, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "none", "":
		return NoEstimates, nil
	case "predicted":
		return Predicted, nil
	}
	if rest, ok := strings.CutPrefix(s, "noisy"); ok {
		rest = strings.TrimPrefix(rest, ":")
		if rest == "" {
			rest = "0.5"
		}
		sigma, err := strconv.ParseFloat(rest, 64)
		if err != nil || sigma < 0 || sigma > 5 || math.IsNaN(sigma) {
			return Estimates{}, fmt.Errorf("estimates %q: σ must be a number from 0 to 5, e.g. noisy:0.5", s)
		}
		return Noisy(sigma), nil
	}
	return Estimates{}, fmt.Errorf("estimates %q: use none, predicted or noisy:σ (e.g. noisy:0.5)", s)
}

// predictKey is what the predictor groups a job's history by: the user,
// GPU count and class where the trace has users, else the GPU count.
func predictKey(j *Job) string {
	if j.User != "" {
		return j.User + "/" + gpuKey(j.GPUs) + "/" + j.Class
	}
	return gpuKey(j.GPUs)
}

var gpuKeys = [...]string{"0gpu", "1gpu", "2gpu", "3gpu", "4gpu", "5gpu", "6gpu", "7gpu", "8gpu"}

func gpuKey(n int) string {
	if n >= 0 && n < len(gpuKeys) {
		return gpuKeys[n]
	}
	return strconv.Itoa(n) + "gpu"
}

// userEstimate is a job's estimate of its whole run under a noisy regime.
func userEstimate(j *Job, e Estimates) time.Duration {
	if e.Mode != "noisy" {
		return 0
	}
	return seconds(j.Duration * math.Exp(e.Sigma*j.Noise))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// NeedOf is a trace job as a stage's need, the way the engine describes a
// live stage: ready since ready, having run attained in earlier attempts,
// with the user's estimate or the predictor's answer as the regime gives.
func NeedOf(j *Job, memMiB int64, ready time.Time, attained time.Duration, e Estimates, p predict.Source) shepherd.Need {
	n := shepherd.Need{ID: j.ID, GPUs: j.GPUs, GPUMemMiB: memMiB, CPUMilli: j.CPUMilli, MemMiB: j.MemMiB,
		Priority: j.Priority, Spot: j.Preemptible, Share: j.Shareable, ReadySince: ready, Attained: attained,
		Estimate: userEstimate(j, e)}
	if e.Mode == "predicted" && p != nil {
		n.Predicted = p.Predict(predict.Query{Key: predictKey(j)})
	}
	return n
}
