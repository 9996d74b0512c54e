package core

import (
	"errors"
	"fmt"

	"github.com/ffrecord/ffrecord/core/internal/engine"
)

// defaultEngine returns the process-wide I/O engine that batches hand their cold reads to.
func defaultEngine() (engine.Engine, error) { return inCoreTerms(engine.Default()) }

// inCoreTerms passes on the result of creating an engine, reporting a kind that names no
// engine (a bad $FFRECORD_ENGINE) as ErrInvalid.
func inCoreTerms(e engine.Engine, err error) (engine.Engine, error) {
	if errors.Is(err, engine.ErrUnknown) {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return e, err
}
