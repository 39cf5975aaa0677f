// Package scripts holds no code of Niuma itself: its tests run the shell
// scripts beside it (apt-source.sh for `make demo-image`, gpu-check.sh) the
// way a user or the Makefile runs them. gpucheck/ is the GPU check's
// comparison tool. soak.sh (make soak) kills the engine at random moments
// and checks the archive afterwards; the Makefile runs its short version.
// phase.sh runs one phase of `make test` and prints its one-line summary
// (passed or failed, and its time).
package scripts
