package memstore_test

import (
	"testing"

	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
	"github.com/gpuguard/gpuguard/internal/tasks/taskstest"
)

func TestConformance(t *testing.T) {
	taskstest.Run(t, func(t *testing.T) taskstest.Opener {
		m := memstore.New()
		return func(t *testing.T) tasks.Store { return m.Open() }
	})
}
