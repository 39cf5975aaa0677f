package sentinel

import "time"

// Config holds every detector's knobs. DefaultConfig's values are the ones
// the evaluation (eval_test.go) measured; change them there first.
type Config struct {
	// Objective is the metric the plateau detector follows and Maximize
	// its direction (a template's objective; "loss", minimised, by default).
	Objective string
	Maximize  bool

	// Loss spike: robust z-score of log(loss) against the median and MAD of
	// the previous SpikeWindow values; at least SpikeMinPoints of them.
	SpikeWindow    int
	SpikeMinPoints int
	SpikeZ         float64
	SpikeMinRatio  float64 // and the value is at least this many times the median

	// Divergence: clipped CUSUM of log(loss) above its best rolling median,
	// in noise units (see doc.go for how K, H and Clip were fitted).
	DivWindow      int     // increments the noise scale is estimated from
	DivLevelWindow int     // values in the rolling median
	DivWarmup      int     // increments seen before the CUSUM starts
	DivK           float64 // drift allowance per step, in scale units
	DivH           float64 // alarm threshold
	DivClip        float64 // one increment adds at most this much
	DivFloor       float64 // smallest scale, in log units (relative change)

	// Gradient explosion: grad_norm-like metric above GradFactor times the
	// median of its previous GradWindow values, or above GradMax (0 = off).
	GradWindow int
	GradFactor float64
	GradMax    float64

	// Plateau: the rolling median of PlateauSmooth values of the objective
	// has not improved on its best by PlateauMinDelta (relative) for
	// PlateauPatience points.
	PlateauPatience int
	PlateauSmooth   int
	PlateauMinDelta float64
	// PlateauBand: the objective must also sit within this share of its
	// best; a loss that climbs away is divergence, not a plateau.
	PlateauBand float64

	// Progress. From ProgressWarmup points on (and up to ProgressMaxPoints),
	// a training loss is compared with where it started: the median of its
	// first quarter (at least ProgressFirst values, blow-ups left out)
	// against the median of its last quarter, on log scale, with the
	// standard error of that difference from the two quarters' spreads.
	// Once the drop is surely below ProgressMinDrop (drop + ProgressZ·se <
	// ProgressMinDrop) it makes no progress; once it is surely above, it
	// does, and is judged no more. A validation accuracy whose level at
	// AccWarmup points (the median of its last third) is within AccNoise
	// (or three times its steps' noise) of where it started (the median of
	// its first third) and no better than AccChance (a coin's), or that has
	// not moved at all (short of perfect), is at chance. A training loss that
	// reaches ExplodeFactor times where it started before the spike
	// detector has a window (SpikeMinPoints values) has diverged.
	ProgressWarmup    int
	ProgressMaxPoints int
	ProgressFirst     int
	ProgressZ         float64
	ProgressMinDrop   float64
	ExplodeFactor     float64
	AccWarmup         int
	AccNoise          float64
	AccChance         float64

	// Hang: no metric line for max(HangMin, HangFactor × the median gap
	// between lines) while the attempt runs.
	HangMin    time.Duration
	HangFactor float64

	// Overheating: within HotMargin °C of the slowdown threshold for
	// HotSamples samples in a row, or thermal throttling active.
	HotMargin  float64
	HotSamples int

	// Memory leak: over the last LeakWindow samples of a run's GPU memory,
	// the least-squares slope's lower confidence bound (LeakT standard
	// errors) is above zero, the fitted growth over the window is at least
	// LeakMinGrowthMiB, and each quarter of the window sits higher than the
	// one before (a steady climb, not a single jump).
	LeakWindow       int
	LeakT            float64
	LeakMinGrowthMiB float64

	// Data-pipeline stall: over the last StallWindow utilisation samples,
	// at least StallShare (and at most StallMaxShare) are below StallLow
	// percent, and the low/high pattern repeats: its autocorrelation peaks
	// at StallACF or more at some lag of 2 or more.
	StallWindow   int
	StallLow      float64
	StallShare    float64
	StallMaxShare float64
	StallACF      float64

	// Idle GPU held: a run holds the GPU at or below IdleUtil percent for
	// IdleAfter.
	IdleUtil  float64
	IdleAfter time.Duration

	// Stuck in queue: waiting QueueAfter without moving up in the queue;
	// QueueNeverAfter for a stage that can never start here (the shepherd
	// says no GPU could ever hold it, or there is no GPU).
	QueueAfter      time.Duration
	QueueNeverAfter time.Duration
}

// DefaultConfig returns the configuration the evaluation was run with.
func DefaultConfig() Config {
	return Config{
		Objective:         "loss",
		SpikeWindow:       30,
		SpikeMinPoints:    8,
		SpikeZ:            8,
		SpikeMinRatio:     1.5,
		DivWindow:         50,
		DivLevelWindow:    25,
		DivWarmup:         5,
		DivK:              1.25,
		DivH:              8,
		DivClip:           3,
		DivFloor:          0.05,
		GradWindow:        30,
		GradFactor:        10,
		PlateauPatience:   100,
		PlateauSmooth:     15,
		PlateauMinDelta:   0.01,
		PlateauBand:       0.1,
		ProgressWarmup:    8,
		ProgressMaxPoints: 100,
		ProgressFirst:     5,
		ProgressZ:         4,
		ProgressMinDrop:   0.02,
		ExplodeFactor:     10,
		AccWarmup:         8,
		AccNoise:          0.05,
		AccChance:         0.5,
		HangMin:           2 * time.Minute,
		HangFactor:        20,
		HotMargin:         5,
		HotSamples:        3,
		LeakWindow:        80,
		LeakT:             4,
		LeakMinGrowthMiB:  64,
		StallWindow:       64,
		StallLow:          10,
		StallShare:        0.15,
		StallMaxShare:     0.9,
		StallACF:          0.3,
		IdleUtil:          2,
		IdleAfter:         10 * time.Minute,
		QueueAfter:        30 * time.Minute,
		QueueNeverAfter:   2 * time.Minute,
	}
}
