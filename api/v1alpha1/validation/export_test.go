package validation

// The helpers of the unit tests, for the integration test (package
// validation_test).
var (
	CloudNames = cloudNames
	DoneRows   = doneRows
)
