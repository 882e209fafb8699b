// Package queue is the small leaf every role of app shares about a queue
// item: how one is built (NewItem, whichever way it comes in: the API's
// enqueue, a retry, a requeue, a schedule's tick), what an execution's end
// does to it (AtEnd, through FinishExecution, for the worker's completion,
// the dispatcher's settling and the maintenance reconciler alike), and a
// schedule's timetable (TimetableOf, read by the API when a schedule is
// written and by maintenance when it fires). It lives apart so that the
// role packages (usecases, dispatch, maintenance, worker) each import it
// and none imports another for it.
package queue
