package gateway

import "syscall"

var errTooManyFiles error = syscall.EMFILE
