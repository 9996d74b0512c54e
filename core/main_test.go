package core

import (
	"os"
	"testing"
)

// killTargetEnv makes the test binary a writer that runs until it is killed.
const killTargetEnv = "FFRECORD_KILL_TARGET"

func TestMain(m *testing.M) {
	if path := os.Getenv(killTargetEnv); path != "" {
		runKilledWriter(path)
	}
	os.Exit(m.Run())
}
