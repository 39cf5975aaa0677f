// Package scripts holds no code of Niuma itself: its tests run the shell
// scripts beside it (apt-source.sh for `make demo-image`, gpu-check.sh) the
// way a user or the Makefile runs them. gpucheck/ is the GPU check's
// comparison tool.
package scripts
