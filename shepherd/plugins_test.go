package shepherd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const gib = 1024

func TestFilters(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	req := &Request{ID: "r", GPUs: 1, MemPerGPUMiB: 20 * gib, Shareable: true, Estimate: time.Hour}
	tests := []struct {
		name   string
		filter Filter
		slot   Slot
		req    *Request
		want   string // "" = passes
	}{
		{"healthy passes", Healthy{}, Slot{GPU: GPU{Healthy: true}}, req, ""},
		{"unhealthy refused", Healthy{}, Slot{GPU: GPU{Healthy: false}}, req, "unhealthy"},
		{"unknown temperature passes", Cool{85}, Slot{GPU: GPU{TempC: 0}}, req, ""},
		{"84 °C passes under 85", Cool{85}, Slot{GPU: GPU{TempC: 84}}, req, ""},
		{"85 °C is too hot", Cool{85}, Slot{GPU: GPU{TempC: 85}}, req, "too hot"},
		// 20 GiB free, 20 GiB asked: fits exactly.
		{"memory exactly fits", Memory{}, Slot{Free: 20 * gib}, req, ""},
		{"memory one MiB short", Memory{}, Slot{Free: 20*gib - 1}, req, "not enough free memory"},
		{"empty gpu takes anyone", Share{2}, Slot{Jobs: 0}, &Request{Shareable: false}, ""},
		{"one tenant, both share", Share{2}, Slot{Jobs: 1}, req, ""},
		{"two tenants is the limit", Share{2}, Slot{Jobs: 2}, req, "at the sharing limit"},
		{"tenant does not share", Share{2}, Slot{Jobs: 1, Exclusive: true}, req, "held by a run that does not share"},
		{"request does not share", Share{2}, Slot{Jobs: 1}, &Request{}, "busy, and this run does not share"},
		{"unreserved gpu", Reserved{}, Slot{}, req, ""},
		{"reserved for this very request", Reserved{}, Slot{ReservedFor: "r", ReservedUntil: now}, req, ""},
		// now 12:00 + 1 h estimate = 13:00 ≤ reservation at 13:00: backfills.
		{"backfill ends in time", Reserved{}, Slot{ReservedFor: "big", ReservedUntil: now.Add(time.Hour)}, req, ""},
		// 12:00 + 1 h = 13:00 > 12:59: would delay the head.
		{"backfill would delay the head", Reserved{}, Slot{ReservedFor: "big", ReservedUntil: now.Add(59 * time.Minute)}, req, "reserved for a run ahead"},
		{"no estimate, no backfill", Reserved{}, Slot{ReservedFor: "big", ReservedUntil: now.Add(99 * time.Hour)}, &Request{ID: "x"}, "reserved for a run ahead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.filter.Filter(&Cycle{Now: now, Req: tt.req}, &tt.slot)
			require.Equal(t, tt.want == "", st.IsSuccess())
			if st != nil {
				require.Equal(t, tt.want, st.Reason)
				require.Equal(t, tt.filter.Name(), st.Plugin)
			}
		})
	}
}

func TestScorers(t *testing.T) {
	req := &Request{MemPerGPUMiB: 30 * gib}
	c := &Cycle{Req: req, MinNeedMiB: 10 * gib}
	tests := []struct {
		name   string
		scorer Scorer
		slot   Slot
		want   int64
	}{
		{"least free: 50 GiB free scores -51200", LeastFree{}, Slot{Free: 50 * gib}, -50 * gib},
		{"lowest index: GPU 3 scores -3", LowestIndex{}, Slot{GPU: GPU{Index: 3}}, -3},
		// 80-30 = 50 GiB left, usable (≥ 10 GiB): score -(0 + 51200).
		{"fragment: usable leftover", LeastFragment{}, Slot{Free: 80 * gib}, -50 * gib},
		// 35-30 = 5 GiB left < 10 GiB smallest need: unusable, -(4·5120 + 5120) = -25600.
		{"fragment: unusable leftover weighs 5×", LeastFragment{}, Slot{Free: 35 * gib}, -25600},
		{"fragment: exact fit", LeastFragment{}, Slot{Free: 30 * gib}, 0},
		{"tenants: 2 runs × weight 10", FewestTenants{Weight: 10}, Slot{Jobs: 2}, -20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.scorer.Score(c, &tt.slot))
		})
	}
}
