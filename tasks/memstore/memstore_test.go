package memstore_test

import (
	"testing"

	"github.com/gpuguard/gpuguard/tasks"
	"github.com/gpuguard/gpuguard/tasks/memstore"
	"github.com/gpuguard/gpuguard/tasks/taskstest"
)

func TestConformance(t *testing.T) {
	taskstest.Run(t, func(t *testing.T) taskstest.Opener {
		m := memstore.New()
		return func(t *testing.T) tasks.Store { return m.Open() }
	})
}
