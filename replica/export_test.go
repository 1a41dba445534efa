package replica

// CreatePointerForTest is createPointer, for the race test.
var CreatePointerForTest = createPointer
