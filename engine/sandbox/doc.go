// Package sandbox holds the rules of a stage's container that no template
// can loosen: which host paths may be mounted into it, which capabilities
// it may keep, which user it runs as and how many processes it may start.
//
// Each rule is one function, used three times with the same answer: by the
// template parser on the template's text (with the line to fix), by the
// engine when a run is submitted (before anything is written), and by the
// docker executor on every container it creates, the last line. A refusal
// is a *Refusal: a Rule code and a message that names the rule and what to
// do instead.
//
// It imports no Niuma package.
package sandbox
