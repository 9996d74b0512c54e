package source

import "runtime"

func runtimeYield() { runtime.Gosched() }
