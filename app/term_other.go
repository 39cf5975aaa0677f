//go:build !unix

package app

import "os"

func ttyWidth(*os.File) int { return 0 }
