// Package template reads experiment templates: YAML files that name the
// stages of an experiment (their commands, needs, GPUs, retries and
// timeouts), a typed parameter schema and an objective. Validation errors
// name the file, the line and what to fix.
//
// A template looks like this:
//
//	name: digits-mlp                 # letters, digits, . - _
//	description: Classify 8x8 digits with a small MLP.
//	version: "1.0"
//	runtime:
//	  kind: docker                   # local | docker (docker needs image:; an image alone means docker)
//	  image: niuma/digits-mlp:1
//	  fallback: local                # optional: the host when the image is missing (else stages wait)
//	  data: ../datasets/digits       # optional; ${data}, read-only in the container; never a system path
//	  shm_size: 2GiB                 # /dev/shm (default 1GiB)
//	  memory: 8GiB                   # hard limit; exceeding it is reported as out of memory
//	  cpus: 4                        # CPU quota
//	  user: "1000:1000"              # default: the user running Niuma; root only where allowed
//	  network: none                  # bridge (default) | none
//	  keep: false                    # keep finished containers
//	  cap_add: [SYS_PTRACE]          # only IPC_LOCK, SYS_NICE, SYS_PTRACE (all are dropped otherwise)
//	  pids_limit: 1024               # processes and threads; may only lower the machine's limit
//	objective: {metric: val_acc, goal: max}   # goal: min | max; metric may be left out
//	params:                          # in this order in the wizard
//	  lr:        {type: float, default: 0.01, min: 0.00001, max: 1.0, log: true, help: Learning rate}
//	  hidden:    {type: int, default: 64, min: 8, max: 1024}
//	  optimizer: {type: choice, default: adam, choices: [adam, sgd]}
//	  momentum:  {type: float, default: 0.9, min: 0, max: 0.99, when: {optimizer: sgd}}
//	  augment:   {type: bool, default: false}
//	  note:      {type: string, default: ""}
//	stages:
//	  - name: train                  # lowercase, digits, - _ (a directory name)
//	    needs: [preprocess]          # stages that must succeed first
//	    command: [python3, "${code}/train.py", --lr, "${params.lr}"]   # argv, no shell
//	    gpus: 1                      # or a parameter: gpus: ${params.gpus} (an int with min: 0)
//	    gpu_memory: 2GiB             # per GPU; MiB, GiB, MB, GB, Mi, Gi...; a bare number is MiB
//	                                 # (or ${params.NAME}: a string size or an int of MiB)
//	    retries: 1
//	    timeout: 30m
//	    env: {OMP_NUM_THREADS: "2"}
//
// Parse checks everything it can without running anything: unknown fields
// (a typo such as "need:" is reported with its line), names, the needs
// graph (unknown stages, cycles), sizes and durations, the parameter schema
// and its defaults, every ${...} reference, and the container rules of
// package sandbox that can be read from the text (capabilities, the form
// of the user, a data path that is a system path).
//
// Command arguments and env values may refer to ${params.NAME} and to the
// EngineVars (${code}, ${run_dir}, ${stage_dir}, ${run_id}, ${stage},
// ${seed}, and ${data} when the runtime names a data directory); the engine substitutes them with Expand, using
// Values.ParamVars for the parameters. "$$" writes a literal "$".
//
// A stage's gpus and gpu_memory written as ${params.NAME} take each run's
// value of that parameter: Stage.GPUsParam / GPUMemoryParam name it,
// Stage.GPUs / GPUMemoryMiB hold its default, and NeedsOf gives a run's.
//
// A stage may also say what it asks of the host (cpus: 2, memory: 8GiB)
// and how long it is expected to run (estimate: 40m): the shepherd places
// by them. A template's spot: true lets its runs be preempted (stopped,
// requeued, resumed with NIUMA_RESUME) and share: true lets them share a
// GPU when memory fits; a launch may set both for its runs.
//
// Parameter values travel as Values: float64, int64, bool or string per
// parameter. Resolve reads CLI-style strings (--set lr=0.1), Validate
// checks typed values from a UI, Normalize fills in defaults and converts
// looser Go types, and JSON / ValuesFromJSON give the canonical params.json.
//
// A parameter with when: applies only while the parameters it names
// (declared above it, of a kind compared exactly: choice, bool, int or
// string) take one of the listed values. Sweep, the grid expansion the
// wizard and `niuma run --sweep` share, sweeps a parameter only where it
// applies; Space hands the schema, conditions included, to the tuner.
//
// YAML anchors, aliases and merge keys (<<: *defaults) are allowed.
// Missing defaults: bool defaults to false, string to "", choice to its
// first choice; float and int parameters must give one.
package template
