package supervisor

import (
	"reflect"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
)

// nonZero sets v, a zero value, to one that is not: a field's change.
func nonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		if v.Type().Elem().Kind() != reflect.Struct {
			nonZero(t, v.Elem())
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		e := v.Index(0)
		if e.Kind() == reflect.Struct {
			nonZero(t, e.Field(0))
		} else {
			nonZero(t, e)
		}
	default:
		t.Fatalf("no change made for a %s", v.Type())
	}
}

// everyFieldCounts fails unless same tells a zero T from one that differs
// in any single field: a field added to T and left out of same fails it.
func everyFieldCounts[T any](t *testing.T, same func(a, b *T) bool) {
	var zero T
	if !same(&zero, &zero) {
		t.Fatalf("%T: a zero value differs from itself", zero)
	}
	typ := reflect.TypeOf(zero)
	for i := range typ.NumField() {
		var changed T
		nonZero(t, reflect.ValueOf(&changed).Elem().Field(i))
		if same(&zero, &changed) || same(&changed, &zero) {
			t.Errorf("%s.%s: a change is not seen", typ.Name(), typ.Field(i).Name)
		}
		other := changed
		if !same(&changed, &other) {
			t.Errorf("%s.%s: equal values differ", typ.Name(), typ.Field(i).Name)
		}
	}
}

// TestSameSeesEveryField: the comparisons that decide whether to publish
// look at every field of what is published.
func TestSameSeesEveryField(t *testing.T) {
	everyFieldCounts(t, sameStatus)
	everyFieldCounts(t, func(a, b *api.GPU) bool { return sameGPU(*a, *b) })
	everyFieldCounts(t, sameTenant)
}

// TestShownGPUs: the status object's gpus are the ones shown before
// exactly when they show the sample; otherwise they are made anew.
func TestShownGPUs(t *testing.T) {
	one := gpu.Sample{Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Name: "A", Used: 1, Total: 8}}}
	two := gpu.Sample{Devices: []gpu.Device{{Index: 0, UUID: "GPU-0", Name: "A", Used: 1, Total: 8}, {Index: 1, UUID: "GPU-1", Name: "A", Used: 2, Total: 8}},
		Processes: []gpu.Process{{PID: 7, Device: 1, Used: 2}, {PID: 8, Device: 0, Used: 1}}}
	moved := func(s gpu.Sample, f func(*gpu.Sample)) gpu.Sample {
		c := gpu.Sample{Devices: append([]gpu.Device(nil), s.Devices...), Processes: append([]gpu.Process(nil), s.Processes...)}
		f(&c)
		return c
	}
	for _, s := range []gpu.Sample{{}, one, two} {
		was := statusGPUs(s)
		if got := shownGPUs(was, s); len(was) > 0 && &got[0] != &was[0] {
			t.Errorf("%+v: the same sample made new gpus", s)
		}
	}
	was := statusGPUs(two)
	for name, s := range map[string]gpu.Sample{
		"used":          moved(two, func(s *gpu.Sample) { s.Devices[1].Used = 3 }),
		"total":         moved(two, func(s *gpu.Sample) { s.Devices[1].Total = 9 }),
		"uuid":          moved(two, func(s *gpu.Sample) { s.Devices[0].UUID = "GPU-2" }),
		"name":          moved(two, func(s *gpu.Sample) { s.Devices[0].Name = "B" }),
		"index":         moved(two, func(s *gpu.Sample) { s.Devices[1].Index = 2 }),
		"a process":     moved(two, func(s *gpu.Sample) { s.Processes[0].Used = 5 }),
		"its pid":       moved(two, func(s *gpu.Sample) { s.Processes[1].PID = 9 }),
		"its device":    moved(two, func(s *gpu.Sample) { s.Processes[1].Device = 1 }),
		"one more":      moved(two, func(s *gpu.Sample) { s.Processes = append(s.Processes, gpu.Process{PID: 9, Device: 0}) }),
		"one fewer":     moved(two, func(s *gpu.Sample) { s.Processes = s.Processes[:1] }),
		"a device less": one,
	} {
		got, want := shownGPUs(was, s), statusGPUs(s)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: gpus %+v, want %+v", name, got, want)
		}
	}
}

// TestInfoReusesOnlyTheSame: the tenant record made against the one told
// before is the one made afresh, whatever was told; it shares the told
// one's GPUs and room where they are the same.
func TestInfoReusesOnlyTheSame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newServingCalmLoop(t)
		fresh := c.l.self.info(c.l.pol, nil)
		if fresh.Room == nil || len(fresh.GPUs) != 1 {
			t.Fatalf("record %+v: want a room and one GPU", fresh)
		}
		for name, was := range map[string]*api.TenantInfo{
			"none":       {},
			"more GPUs":  {GPUs: append(slices.Clone(fresh.GPUs), api.TenantGPU{UUID: "GPU-x"})},
			"other GPU":  {GPUs: []api.TenantGPU{{UUID: "GPU-x"}}},
			"its usage":  {GPUs: []api.TenantGPU{{UUID: fresh.GPUs[0].UUID, UsedBytes: 1}}},
			"other room": {Room: &api.TenantRoom{CanSleep: true}},
			"the same":   &fresh,
		} {
			if got := c.l.self.info(c.l.pol, was); !reflect.DeepEqual(got, fresh) {
				t.Errorf("told %s: record %+v, want %+v", name, got, fresh)
			}
		}
		if got := c.l.self.info(c.l.pol, &fresh); got.Room != fresh.Room || &got.GPUs[0] != &fresh.GPUs[0] {
			t.Error("an unchanged record's room and GPUs were made anew")
		}
	})
}

// TestSameTree: a tree is the same when it holds exactly the processes
// listed, a process listed twice (on two GPUs) counted once.
func TestSameTree(t *testing.T) {
	tree := map[int]bool{1: true, 2: true}
	for _, tc := range []struct {
		pids []int
		want bool
	}{
		{[]int{1, 2}, true},
		{[]int{2, 1, 2}, true},
		{[]int{1, 1}, false},
		{[]int{1}, false},
		{[]int{1, 2, 3}, false},
		{nil, false},
	} {
		if got := sameTree(tree, tc.pids); got != tc.want {
			t.Errorf("sameTree(%v, %v) = %v, want %v", tree, tc.pids, got, tc.want)
		}
	}
	if sameTree(nil, []int{1}) || !sameTree(nil, nil) {
		t.Error("an empty tree: want it the same as no process only")
	}
}
