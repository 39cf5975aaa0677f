package shepherd

// The refusals of this package's filters (shared: never modify them).
var (
	stHealthyUnhealthy                = &Status{Unschedulable, "Healthy", "unhealthy", WaitGPUUnhealthy}
	stCoolTooHot                      = &Status{Unschedulable, "Cool", "too hot", WaitGPUHot}
	stMemoryNotEnoughFreeMemory       = &Status{Unschedulable, "Memory", "not enough free memory", WaitGPUMemory}
	stHostRoomNoCPU                   = &Status{Unschedulable, "HostRoom", "on a host without the CPUs", WaitCPU}
	stHostRoomNoMemory                = &Status{Unschedulable, "HostRoom", "on a host without the memory", WaitHostMemory}
	stShareAtTheSharingLimit          = &Status{Unschedulable, "Share", "at the sharing limit", WaitGPUBusy}
	stShareHeldByARunThatDoesNotShare = &Status{Unschedulable, "Share", "held by a run that does not share", WaitGPUBusy}
	stShareBusyAndThisRunDoesNotShare = &Status{Unschedulable, "Share", "busy, and this run does not share", WaitGPUBusy}
	stReservedReservedForARunAhead    = &Status{Unschedulable, "Reserved", "reserved for a run ahead", WaitReserved}
	stOneTeamHeldByAnotherTeam        = &Status{Unschedulable, "OneTeam", "held by another team's runs", WaitGPUBusy}
)

// OwnGPUs gives a run within its team's share (Request.Tier set by a
// sharing pass) a GPU of its own when one is empty, as it would have on a
// partition of its team's: a team's runs share a GPU only once its share
// is spread. Borrowers pack as the policy's other scorers say.
type OwnGPUs struct{}

// Name implements Scorer.
func (OwnGPUs) Name() string { return "OwnGPUs" }

// Score implements Scorer.
func (OwnGPUs) Score(c *Cycle, s *Slot) int64 {
	if c.Req.Tier == tierShare && s.Jobs == 0 {
		return 1 << 40
	}
	return 0
}

// OneTeam lets runs share a GPU only with runs of their own team: on a
// machine shared among teams, a team's run is never slowed down by
// another team's on its GPU (as on a partition of its own), and no team
// sees another's memory use on its GPUs. A sharing pass adds it.
type OneTeam struct{}

// Name implements Filter.
func (OneTeam) Name() string { return "OneTeam" }

// Filter implements Filter.
func (OneTeam) Filter(c *Cycle, s *Slot) *Status {
	if s.Jobs > 0 && s.Team != c.Req.Team {
		return stOneTeamHeldByAnotherTeam
	}
	return nil
}

// Healthy refuses GPUs the telemetry marks unhealthy (XID errors, lost).
type Healthy struct{}

// Name implements Filter.
func (Healthy) Name() string { return "Healthy" }

// Filter implements Filter.
func (Healthy) Filter(_ *Cycle, s *Slot) *Status {
	if !s.Healthy {
		return stHealthyUnhealthy
	}
	return nil
}

// Cool refuses GPUs at or above MaxC degrees (an unknown temperature, 0,
// passes).
type Cool struct{ MaxC float64 }

// Name implements Filter.
func (Cool) Name() string { return "Cool" }

// Filter implements Filter.
func (f Cool) Filter(_ *Cycle, s *Slot) *Status {
	if f.MaxC > 0 && s.TempC >= f.MaxC {
		return stCoolTooHot
	}
	return nil
}

// Memory refuses GPUs whose free memory is below the request's per-GPU need.
type Memory struct{}

// Name implements Filter.
func (Memory) Name() string { return "Memory" }

// Filter implements Filter.
func (Memory) Filter(c *Cycle, s *Slot) *Status {
	if s.Free < c.Req.MemPerGPUMiB {
		return stMemoryNotEnoughFreeMemory
	}
	return nil
}

// HostRoom refuses GPUs whose host has too few free CPUs or too little
// free memory for the request (hosts the inventory does not list pass).
type HostRoom struct{}

// Name implements Filter.
func (HostRoom) Name() string { return "HostRoom" }

// Filter implements Filter.
func (HostRoom) Filter(c *Cycle, s *Slot) *Status {
	if len(c.Hosts) == 0 {
		return nil
	}
	h := &c.Hosts[s.HostIdx]
	switch {
	case !h.tracked:
		return nil
	case h.CPUMilli > 0 && h.FreeCPUMilli < c.Req.CPUMilli:
		return stHostRoomNoCPU
	case h.MemMiB > 0 && h.FreeMemMiB < c.Req.MemMiB:
		return stHostRoomNoMemory
	}
	return nil
}

// Share bounds co-location: at most Max runs on one GPU, and a run that
// may not share gets a GPU of its own.
type Share struct{ Max int }

// Name implements Filter.
func (Share) Name() string { return "Share" }

// Filter implements Filter.
func (f Share) Filter(c *Cycle, s *Slot) *Status {
	switch {
	case s.Jobs == 0:
		return nil
	case f.Max > 0 && s.Jobs >= f.Max:
		return stShareAtTheSharingLimit
	case s.Exclusive:
		return stShareHeldByARunThatDoesNotShare
	case !c.Req.Shareable:
		return stShareBusyAndThisRunDoesNotShare
	}
	return nil
}

// Reserved keeps GPUs reserved for the head of the queue: another run may
// backfill them only when its estimate says it ends before the reservation
// (so the head is not delayed) — by its high estimate when it has one —
// and a run with no estimate may not.
type Reserved struct{}

// Name implements Filter.
func (Reserved) Name() string { return "Reserved" }

// Filter implements Filter.
func (Reserved) Filter(c *Cycle, s *Slot) *Status {
	if s.ReservedFor == "" || s.ReservedFor == c.Req.ID {
		return nil
	}
	if est := effEst(c.Req); est < 1<<63-1 && !c.Now.Add(est).After(s.ReservedUntil) {
		return nil
	}
	return stReservedReservedForARunAhead
}

// LeastFree prefers the GPU with the least free memory: best fit, as the
// original design's baseline scans GPUs by free memory ascending.
type LeastFree struct{}

// Name implements Scorer.
func (LeastFree) Name() string { return "LeastFree" }

// Score implements Scorer.
func (LeastFree) Score(_ *Cycle, s *Slot) int64 { return -s.Free }

// LowestIndex prefers the lowest GPU index: first fit.
type LowestIndex struct{}

// Name implements Scorer.
func (LowestIndex) Name() string { return "LowestIndex" }

// Score implements Scorer.
func (LowestIndex) Score(_ *Cycle, s *Slot) int64 { return -int64(s.Index) }

// LeastFragment prefers the placement that leaves the least memory no
// waiting run could use (a leftover smaller than the queue's smallest need),
// then the tightest fit. Unusable MiB weigh 4× leftover MiB.
type LeastFragment struct{}

// Name implements Scorer.
func (LeastFragment) Name() string { return "LeastFragment" }

// Score implements Scorer.
func (LeastFragment) Score(c *Cycle, s *Slot) int64 {
	left := s.Free - c.Req.MemPerGPUMiB
	var unusable int64
	if left > 0 && left < c.MinNeedMiB {
		unusable = left
	}
	return -(4*unusable + left)
}

// FewestTenants prefers GPUs with fewer runs on them, so that co-location
// (and its slowdown) happens only where it saves a whole GPU. Weight scales
// it against the memory scores (MiB).
type FewestTenants struct{ Weight int64 }

// Name implements Scorer.
func (FewestTenants) Name() string { return "FewestTenants" }

// Score implements Scorer.
func (f FewestTenants) Score(_ *Cycle, s *Slot) int64 { return -f.Weight * int64(s.Jobs) }

// Fragmentation prefers the placement that leaves the machine's free
// memory most usable by the runs it serves (the Cycle's Demand), after FGD
// (fragmentation gradient descent, ATC'23): a GPU's fragment is its free
// memory times the share of requests that need more than that, and the
// score is how much the placement lowers the GPU's fragment. Filling a
// partly used GPU scores above opening an empty one that whole-GPU runs
// could still use.
type Fragmentation struct{}

// Name implements Scorer.
func (Fragmentation) Name() string { return "Fragmentation" }

// Score implements Scorer.
func (Fragmentation) Score(c *Cycle, s *Slot) int64 {
	before := float64(s.Free) * c.Demand.Unusable(s.Free)
	left := s.Free - c.Req.MemPerGPUMiB
	after := float64(left) * c.Demand.Unusable(left)
	return int64(before - after)
}
