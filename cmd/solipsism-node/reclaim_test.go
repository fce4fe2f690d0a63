package main

import "testing"

func TestReclaimer(t *testing.T) {
	tests := []struct {
		name  string
		loads []int
		want  []bool
	}{
		{"small worlds never", []int{10, 500, 2, 2}, []bool{false, false, false, false}},
		{"after a flood leaves, at each quartering", []int{100, 50000, 40000, 12000, 11000, 100, 100}, []bool{false, false, false, false, true, false, true}},
		{"once per flood", []int{8000, 100, 100, 100, 9000, 10, 10}, []bool{false, false, true, false, false, false, true}},
		{"not if the load comes back", []int{8000, 100, 5000, 100, 100}, []bool{false, false, false, false, true}},
		{"after a flood that stays, once settled", []int{100, 60000, 60000, 60100, 60000, 60000}, []bool{false, false, false, true, false, false}},
		{"not while it grows", []int{100, 20000, 40000, 60000, 80000}, []bool{false, false, false, false, false}},
		{"not for a small growth", []int{100, 2000, 2000, 2000}, []bool{false, false, false, false}},
		{"a big world grown by less than a quarter", []int{100, 60000, 60000, 60000, 70000, 70000, 70000, 80000, 80000, 80000},
			[]bool{false, false, false, true, false, false, false, false, false, true}},
	}
	t.Run("a flood between two checks", func(t *testing.T) {
		load, released := 100, 0
		r := &reclaimer{load: func() int { return load }, release: func() { released++ }, minPeak: 4096}
		r.check()
		r.observe(60000)
		r.observe(30000)
		if r.check() || !r.check() || released != 1 {
			t.Fatal("a flood seen by observe alone released nothing")
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, released := 0, 0
			r := &reclaimer{load: func() int { return tt.loads[i] }, release: func() { released++ }, minPeak: 4096}
			for i = range tt.loads {
				before := released
				if got := r.check(); got != tt.want[i] || (released > before) != got {
					t.Fatalf("step %d (load %d): released %v, want %v", i, tt.loads[i], got, tt.want[i])
				}
			}
		})
	}
}
