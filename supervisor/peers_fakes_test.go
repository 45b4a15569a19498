package supervisor

import (
	"errors"

	"github.com/gpuguard/gpuguard/internal/sharing"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
)

const fakeGPU = sharingtest.GPU

var errVoided = errors.New("decision was given up by its decider")

// withCoord wires the instance's peers over fc into the harness.
func withCoord(fc *sharingtest.Coord, more ...func(*Config, *Deps)) func(*Config, *Deps) {
	return func(c *Config, d *Deps) {
		for _, m := range more {
			m(c, d)
		}
		d.Peers = sharing.New(fc, d.Logf)
	}
}
