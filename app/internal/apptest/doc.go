// Package apptest holds the fakes and checks the tests of several app
// packages share: a lease (a fake ShedLock table, one view per holder)
// that the dispatcher's and the maintenance jobs' tests both run against,
// an engine that answers DescribeWorkflow from a map, a stale claimed
// item, and CheckBuilt, what every way in must get from queue.NewItem.
// It is internal to app and used only by tests.
package apptest
