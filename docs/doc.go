// Package docs holds Niuma's documentation (the guide under guide/, the
// architecture, benchmarks, reliability and scaling pages) and the tests
// that keep it true: every relative link of README.md and of docs/**/*.md
// leads to a file that exists (and to a heading that exists, for a link
// with an anchor), and the README stays a page a newcomer reads in a few
// minutes, with the set-up commands on its first screen and a link to
// every guide page. It has no code; it imports nothing of Niuma's.
package docs
