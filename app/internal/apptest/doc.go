// Package apptest holds the fakes the tests of several app packages share:
// a lease (a fake ShedLock table, one view per holder) that the
// dispatcher's and the maintenance jobs' tests both run against. It is
// internal to app and used only by tests.
package apptest
