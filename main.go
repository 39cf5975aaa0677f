// Command niuma is the digital workhorse: a desktop app, and the same engine
// headless, for running ML experiments on a lab workstation.
package main

import (
	"os"

	"niuma/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
