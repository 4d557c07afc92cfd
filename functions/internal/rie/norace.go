//go:build !race

package rie

// raceEnabled: this binary was built without -race, and so is a Build.
const raceEnabled = false
