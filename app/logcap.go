package app

import (
	"os"

	"niuma/engine/executor/logcap"
)

// logCapSetting reads NIUMA_LOG_CAP, the bytes of each stream of an attempt
// its log keeps (0, the default, when unset).
func logCapSetting() (int64, error) {
	v := os.Getenv(logcap.Setting)
	if v == "" {
		return 0, nil
	}
	return logcap.Parse(v)
}
