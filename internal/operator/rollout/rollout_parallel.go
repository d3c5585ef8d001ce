package rollout

import (
	"errors"
	"sync"
)

// passWorkers bounds the API requests a pass makes at once for the rows
// of a large set: act's creates and deletes, markPlanned's patches and
// recordWorkloads' reads. Each is for one row's node and independent of
// the others, so a set of hundreds of nodes does not wait for them one
// after the other (the first pass of 500 nodes marks 450 of them planned).
const passWorkers = 16

// forEach runs f(0..n-1), at most passWorkers at once, and returns their
// errors joined, in index order.
func forEach(n int, f func(i int) error) error {
	errs := make([]error, n)
	slots := make(chan struct{}, passWorkers)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// refused notes that an action of this pass failed the row of node, for
// act's second write; safe from act's concurrent actions.
func (s *scope) refused(node, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[node] = why
}
