package batch

import (
	"context"
	"log/slog"
	"sync"

	"github.com/idemkit/idemkit/idempotent"
)

// plan is the order in which a batch is processed. A lane is a list of
// records (indexes into the batch, in batch order) processed one after
// another; lanes may run side by side. A key that occurs in several lanes
// gets a lock, so that its records never run at the same time: the later
// ones are then answered from the first one's entry.
type plan struct {
	lanes [][]int
	locks map[string]*sync.Mutex // read-only once made
	done  *keySet                // keys whose handler ran and succeeded in this batch
}

// keySet is a set of keys shared by the lanes of one batch.
type keySet struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (s *keySet) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = make(map[string]bool)
	}
	s.keys[key] = true
}

func (s *keySet) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key]
}

func makePlan[R, T any](items []item[R, T], order Order) *plan {
	p := &plan{done: &keySet{}}
	laneOf := make(map[string]int)
	for i := range items {
		it := &items[i]
		var key string
		if it.hasKey() {
			key = it.key
		}
		name := order.Lane(i, key)
		if name == "" { // a lane of its own
			p.lanes = append(p.lanes, []int{i})
			continue
		}
		if l, ok := laneOf[name]; ok {
			p.lanes[l] = append(p.lanes[l], i)
			continue
		}
		laneOf[name] = len(p.lanes)
		p.lanes = append(p.lanes, []int{i})
	}
	firstLane := make(map[string]int)
	for l, lane := range p.lanes {
		for _, i := range lane {
			it := &items[i]
			if !it.hasKey() {
				continue
			}
			if first, ok := firstLane[it.key]; !ok {
				firstLane[it.key] = l
			} else if first != l && p.locks[it.key] == nil {
				if p.locks == nil {
					p.locks = make(map[string]*sync.Mutex)
				}
				p.locks[it.key] = new(sync.Mutex)
			}
		}
	}
	return p
}

// runLanes processes every lane, up to p.parallelism lanes at once. Each lane
// writes only its own entries of results.
func (p *Processor[R, T]) runLanes(ctx context.Context, pl *plan, order Order, items []item[R, T], results []Result, wave *idempotent.Batch) {
	n := p.parallelism
	if n == 0 {
		n = max(order.Parallelism, 1)
	}
	n = min(n, len(pl.lanes))
	if n <= 1 {
		for _, lane := range pl.lanes {
			p.runLane(ctx, pl, order, lane, items, results, wave)
		}
		return
	}
	// Every lane is queued before the workers start, so a worker that exits
	// early (runtime.Goexit) cannot block the queueing; its unprocessed
	// records stay NotRun.
	next := make(chan []int, len(pl.lanes))
	for _, lane := range pl.lanes {
		next <- lane
	}
	close(next)
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			for lane := range next {
				p.runLane(ctx, pl, order, lane, items, results, wave)
			}
		}()
	}
	wg.Wait()
}

// runLane processes a lane's records in order. With order.Stop the first
// record not done ends the lane: the rest are Skipped, so that a retry sees
// them in their original order.
func (p *Processor[R, T]) runLane(ctx context.Context, pl *plan, order Order, lane []int, items []item[R, T], results []Result, wave *idempotent.Batch) {
	for pos, i := range lane {
		p.process(ctx, pl, wave, i, &items[i], &results[i])
		if results[i].Status == Done || !order.Stop {
			continue
		}
		for _, j := range lane[pos+1:] {
			results[j].Status = Skipped
			p.log().LogAttrs(ctx, slog.LevelInfo, p.src.Name+": skipped after an earlier failure in its "+order.LaneNoun,
				items[j].attrs...)
		}
		return
	}
}
