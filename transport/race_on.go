//go:build race

package transport

// raceBuild reports a binary built with -race (tests): its supervisor
// process is told not to linger at exit (see supervisorRaceEnv).
const raceBuild = true
