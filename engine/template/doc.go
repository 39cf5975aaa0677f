// Package template reads experiment templates: YAML files that name the
// stages of an experiment (their commands, needs, GPUs, retries and
// timeouts), a typed parameter schema and an objective. Validation errors
// name the file, the line and what to fix.
package template
