package scheduler

import "context"

// startBind runs job — a binding cycle, holding one of bindSlots, which is freed when
// it returns — on a binder goroutine that stays for the next bind: an idle one if there
// is one, else a new one while fewer binders than slots exist, else the first binder to
// finish its job. A binding cycle's call chain goes deep (client-go's request and
// encoder, the in-process transport), and the stack of a goroutine started per bind
// grew by copying two or three times on every bind (1.7 % of `kubette up`'s CPU while
// binding at 5000 nodes). binds counts the jobs until they return; binders leave when
// the context they started with is done. Only the scheduling goroutine calls startBind.
func (s *Scheduler) startBind(ctx context.Context, job func()) {
	s.binds.Add(1)
	for {
		if s.binders.Load() < int64(cap(s.bindSlots)) {
			select {
			case s.bindJobs <- job:
			default:
				s.binders.Add(1)
				s.binderGroup.Add(1)
				go s.binder(ctx, job)
			}
			return
		}
		// As many binders as slots, and this job holds a slot: a binder is done with
		// its job and about to take the next — unless binders are leaving (the
		// context of an earlier call ended), which binderLeft tells: count again.
		select {
		case s.bindJobs <- job:
			return
		case <-s.binderLeft:
		case <-ctx.Done():
			// The bind still runs, as it would have before ctx ended.
			go s.runBind(job)
			return
		}
	}
}

// binder runs jobs until ctx is done.
func (s *Scheduler) binder(ctx context.Context, job func()) {
	defer s.binderGroup.Done()
	defer func() {
		s.binders.Add(-1)
		select {
		case s.binderLeft <- struct{}{}:
		default:
		}
	}()
	for {
		s.runBind(job)
		select {
		case job = <-s.bindJobs:
		case <-ctx.Done():
			return
		}
	}
}

// runBind runs job, frees its slot and counts it done.
func (s *Scheduler) runBind(job func()) {
	defer s.binds.Done()
	defer func() { <-s.bindSlots }()
	job()
}
