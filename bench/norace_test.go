//go:build !race

package bench

// raceEnabled is set when the tests run with the race detector, which
// makes sync.Pool drop what it is given at random.
const raceEnabled = false
