// Package docs holds Sluice's documentation pages. It has no code: its
// test checks that every relative link and anchor in README.md,
// CHANGELOG.md and docs/*.md resolves, so a page that moves or a heading
// that is renamed cannot leave a reader at a dead end.
package docs
