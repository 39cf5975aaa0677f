package gpumon_test

import (
	"context"
	"fmt"
	"log/slog"

	"niuma/gpumon"
)

// The lifecycle the app follows: pick the source once at start, run the
// health watch and the sampler for as long as the app lives, give the
// sampler to the engine as its GPU source, and store the per-minute
// records through a function (the app converts to storage.GPUSample).
// It has no Output line: on a machine with real GPUs NVML is chosen.
func ExampleOpen() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	owners := gpumon.NewOwners(nil) // the docker executor's labeler, when there is one
	opened, err := gpumon.Open(ctx, gpumon.Config{
		Simulate: "2xA100-80GB", // from --simulate-gpus; "" reads $NIUMA_SIMULATE_GPUS
		NVML:     gpumon.NVMLOptions{Owners: owners},
	})
	if err != nil {
		fmt.Println(err) // a spec it cannot read
		return
	}
	defer opened.Close()
	if opened.NVML != nil {
		go opened.NVML.WatchHealth(ctx)
	}
	sampler := gpumon.NewSampler(opened.Source, gpumon.SamplerOptions{
		Store:  func(ctx context.Context, m []gpumon.Minute) error { return nil },
		Logger: slog.Default(),
	})
	go sampler.Run(ctx)

	// The engine assigns a GPU to an attempt; a simulated GPU's telemetry
	// follows it (a real GPU ignores it: NVML sees the processes).
	snap, _ := sampler.Snapshot(ctx)
	var a gpumon.Assigner = sampler
	a.Assign(snap.GPUs[0].UUID, "r1/train", 30000)
	snap, _ = sampler.Sample(ctx)
	fmt.Println(snap.Source, len(snap.GPUs), snap.GPUs[0].MemUsedMiB)
	a.Release(snap.GPUs[0].UUID, "r1/train")
}
