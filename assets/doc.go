// Package assets embeds what ships inside the niuma binary: the application
// icon and the bundled templates with their workloads (the digits-mlp demo).
package assets
