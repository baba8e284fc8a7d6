//go:build race

package scheduler_test

// raceEnabled: the race detector slows the API server tenfold; throughput runs shrink.
const raceEnabled = true
