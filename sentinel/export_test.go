package sentinel

// KerasRunningMean lends the external tests (the progress fit) the
// running-mean series runningmean_test.go generates.
var KerasRunningMean = kerasRunningMean
